"""TileLang: a block of rows per program, each row loaded once into registers as fp32, its sum of squares
reduced across the block's threads (T.reduce_sum), scaled and stored. GPU only: there is no CPU implementation
(the coverage grid shows that gap)."""
from opmatrix.kit import Built, aot, load_spec

spec = load_spec(__file__)
_BLOCK_ROWS = 1


def _config(hidden: int) -> dict:
    return {"block_rows": _BLOCK_ROWS, "threads": aot.tilelang_row_threads(hidden)}


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
        device, "rmsnorm", lambda: _config(workload["hidden"]),
        lambda config: _kernel(workload["tokens"], workload["hidden"], dtype, **config))

    def rmsnorm(x, weight, out):
        kernel(x, weight, out)

    return Built(rmsnorm, config)


def compile_for(workload, dtype, device, variant):
    config = _config(workload["hidden"])
    func = _kernel(workload["tokens"], workload["hidden"], dtype, **config)
    return aot.tilelang_compile_for(func, device, config)
