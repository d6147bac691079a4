"""TileLang: a block of rows per program (as kernels/rmsnorm/tilelang.py), each row of x and of the residual
loaded once into registers as fp32 and added; h is stored to out[1], its sum of squares reduced across the
block's threads (T.reduce_sum), scaled by rsqrt(mean + eps) and w and stored to out[0]. h is never read back.
GPU only: there is no CPU implementation (the coverage grid shows that gap)."""
from opmatrix.kit import Built, aot, load_spec

spec = load_spec(__file__)
_BLOCK_ROWS = 1


def _config(hidden: int) -> dict:
    return {"block_rows": _BLOCK_ROWS, "threads": aot.tilelang_row_threads(hidden)}


def _kernel(tokens, hidden, dtype, block_rows, threads):
    import tilelang.language as T

    eps = spec.EPS

    @T.prim_func
    def add_rmsnorm(X: T.Tensor((tokens, hidden), dtype), R: T.Tensor((tokens, hidden), dtype),
                    W: T.Tensor((hidden,), dtype), O: T.Tensor((2, tokens, hidden), dtype)):
        with T.Kernel(T.ceildiv(tokens, block_rows), threads=threads) as bx:
            h = T.alloc_fragment((block_rows, hidden), "float32")
            r = T.alloc_fragment((block_rows, hidden), "float32")
            sq = T.alloc_fragment((block_rows, hidden), "float32")
            total = T.alloc_fragment((block_rows,), "float32")
            T.copy(X[bx * block_rows:(bx + 1) * block_rows, :], h)
            T.copy(R[bx * block_rows:(bx + 1) * block_rows, :], r)
            for i, j in T.Parallel(block_rows, hidden):
                h[i, j] = h[i, j] + r[i, j]
            T.copy(h, O[1, bx * block_rows:(bx + 1) * block_rows, :])
            for i, j in T.Parallel(block_rows, hidden):
                sq[i, j] = h[i, j] * h[i, j]
            T.reduce_sum(sq, total, dim=1)
            for i in T.Parallel(block_rows):
                total[i] = T.rsqrt(total[i] / hidden + eps)
            for i, j in T.Parallel(block_rows, hidden):
                h[i, j] = h[i, j] * total[i] * W[j]
            T.copy(h, O[0, bx * block_rows:(bx + 1) * block_rows, :])

    return add_rmsnorm


def build(workload, dtype, device, variant):
    kernel, config = aot.tilelang_gpu_build(
        device, "add_rmsnorm", lambda: _config(workload["hidden"]),
        lambda config: _kernel(workload["tokens"], workload["hidden"], dtype, **config))

    def add_rmsnorm(x, residual, weight, out):
        kernel(x, residual, weight, out)

    return Built(add_rmsnorm, config)


def compile_for(workload, dtype, device, variant):
    config = _config(workload["hidden"])
    func = _kernel(workload["tokens"], workload["hidden"], dtype, **config)
    return aot.tilelang_compile_for(func, device, config)
