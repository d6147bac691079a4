"""TileLang: a block of rows per program, each row loaded once into registers as fp32, its sum of squares
reduced across the block's threads (T.reduce_sum), scaled and stored. GPU only: there is no CPU implementation
(the coverage grid shows that gap).

Variants: `default` holds one row per program, `two_rows` two (the same threads, so twice the bytes per thread).
Paired on H200s (reports/20261201-h200-rmsnorm-two-rows and -repeat, NOTES there): at odd_5120 two rows are
1.01x one row and reach 92.5-92.8 % of the copy ceiling; at llama_4096 they are 0.99-1.00x (89.2-89.6 %)."""
from opmatrix.kit import Built, aot, load_spec

spec = load_spec(__file__)
VARIANTS = ("default", "two_rows")
_BLOCK_ROWS = {"default": 1, "two_rows": 2}


def _config(hidden: int, variant: str) -> dict:
    return {"block_rows": _BLOCK_ROWS[variant], "threads": aot.tilelang_row_threads(hidden)}


def _kernel(tokens, hidden, dtype, block_rows, threads):
    import tilelang.language as T

    eps = spec.EPS

    @T.prim_func
    def rmsnorm(X: T.Tensor((tokens, hidden), dtype), W: T.Tensor((hidden,), dtype),
                Y: T.Tensor((tokens, hidden), dtype)):
        with T.Kernel(T.ceildiv(tokens, block_rows), threads=threads) as bx:
            x = T.alloc_fragment((block_rows, hidden), "float32")
            sq = T.alloc_fragment((block_rows, hidden), "float32")
            total = T.alloc_fragment((block_rows,), "float32")
            T.copy(X[bx * block_rows, 0], x)
            for i, j in T.Parallel(block_rows, hidden):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, total, dim=1)
            for i in T.Parallel(block_rows):
                total[i] = T.rsqrt(total[i] / hidden + eps)
            for i, j in T.Parallel(block_rows, hidden):
                x[i, j] = x[i, j] * total[i] * W[j]
            T.copy(x, Y[bx * block_rows, 0])

    return rmsnorm


def build(workload, dtype, device, variant):
    kernel, config = aot.tilelang_gpu_build(
        device, "rmsnorm", lambda: _config(workload["hidden"], variant),
        lambda config: _kernel(workload["tokens"], workload["hidden"], dtype, **config))

    def rmsnorm(x, weight, out):
        kernel(x, weight, out)

    return Built(rmsnorm, config)


def compile_for(workload, dtype, device, variant):
    config = _config(workload["hidden"], variant)
    func = _kernel(workload["tokens"], workload["hidden"], dtype, **config)
    return aot.tilelang_compile_for(func, device, config)
