"""TileLang: a (block_M rows x block_N columns) tile per program; gate and up copied into fp32 registers
(vectorised), silu(gate) * up computed there and the tile stored once. GPU only: there is no CPU implementation
(the coverage grid shows that gap)."""
from opmatrix.kit import Built, Unsupported, aot

_THREADS = 256


def _config(tokens: int, intermediate: int) -> dict:
    """The widest column block (up to 1024) and the most rows (up to 4) that split the tensor evenly: each thread
    then holds whole 16-byte vectors and no tile runs past the edge."""
    block_n = next((n for n in (1024, 512, 256) if intermediate % n == 0), None)
    if block_n is None:
        raise Unsupported(f"intermediate size {intermediate} is not a multiple of 256, which this kernel's tiles "
                          "need")
    block_m = next(m for m in (4, 2, 1) if tokens % m == 0)
    return {"block_M": block_m, "block_N": block_n, "threads": _THREADS}


def _kernel(tokens, intermediate, dtype, block_M, block_N, threads):
    import tilelang.language as T

    @T.prim_func
    def swiglu(G: T.Tensor((tokens, intermediate), dtype), U: T.Tensor((tokens, intermediate), dtype),
               O: T.Tensor((tokens, intermediate), dtype)):
        with T.Kernel(T.ceildiv(intermediate, block_N), T.ceildiv(tokens, block_M), threads=threads) as (bx, by):
            g = T.alloc_fragment((block_M, block_N), "float32")
            u = T.alloc_fragment((block_M, block_N), "float32")
            T.copy(G[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N], g)
            T.copy(U[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N], u)
            for i, j in T.Parallel(block_M, block_N):
                g[i, j] = g[i, j] / (1.0 + T.exp(-g[i, j])) * u[i, j]
            T.copy(g, O[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N])

    return swiglu


def build(workload, dtype, device, variant):
    kernel, config = aot.tilelang_gpu_build(
        device, "swiglu", lambda: _config(workload["tokens"], workload["intermediate"]),
        lambda config: _kernel(workload["tokens"], workload["intermediate"], dtype, **config))

    def swiglu(gate, up, out):
        kernel(gate, up, out)

    return Built(swiglu, config)


def compile_for(workload, dtype, device, variant):
    config = _config(workload["tokens"], workload["intermediate"])
    func = _kernel(workload["tokens"], workload["intermediate"], dtype, **config)
    return aot.tilelang_compile_for(func, device, config)
