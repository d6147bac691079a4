"""TileLang: a block of rows per program, each row loaded once into registers as fp32, its sum of squares
reduced across the block's threads (T.reduce_sum), scaled and stored. GPU only: there is no CPU implementation
(the coverage grid shows that gap).

Variants:
- `default`: one row per program.
- `two_rows`: two rows per program on the same threads (twice the bytes per thread). Paired on H200s
  (reports/20261201-h200-rmsnorm-two-rows and -repeat): ahead of one row at odd_5120, level at llama_4096.
- `l2_prefetch` (Hopper and later): one row per program, and each program first has the TMA unit bring the row of
  the program 3 x SMs launches ahead into L2 (one `cp.async.bulk.prefetch.L2`, PTX through T.import_source: TileLang
  has no prefetch of its own). DRAM then streams ahead of the programs instead of in whole-program bursts. Paired
  on four H200s (reports/20261201-h200-rmsnorm-l2-prefetch and its -repeat, -other-gpu, -triton, -triton-repeat;
  the shares of the copy ceiling in docs/results.md): ahead of one row, level with torch's own copy of the same
  bytes at llama_4096. The distance (spec.L2_PREFETCH_PER_SM):
  reports/20261201-h200-rmsnorm-tilelang/NOTES.md, section 5. kernels/rmsnorm/triton.py has the same variant.
"""
from opmatrix.kit import ITEMSIZE, Built, aot, load_spec

spec = load_spec(__file__)
VARIANTS = ("default", "two_rows", "l2_prefetch")
_BLOCK_ROWS = {"default": 1, "two_rows": 2, "l2_prefetch": 1}
_L2_PREFETCH = r"""
__device__ __forceinline__ void l2_prefetch_bulk(const void* address, unsigned bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(address), "r"(bytes) : "memory");
}
"""


def _config(hidden: int, variant: str, device, sms) -> dict:
    """`sms`: the SM count, a function, read only for `l2_prefetch` (the build's GPU, or the arch's)."""
    config = {"block_rows": _BLOCK_ROWS[variant], "threads": aot.tilelang_row_threads(hidden)}
    if variant == "l2_prefetch":
        aot.require_bulk_l2_prefetch(device, variant)
        config["prefetch_ahead"] = spec.L2_PREFETCH_PER_SM * sms(device)
    return config


def _kernel(tokens, hidden, dtype, block_rows, threads, prefetch_ahead=0, min_blocks_per_sm=0):
    """`prefetch_ahead` > 0: program bx first prefetches into L2 the rows of program bx + prefetch_ahead.
    `min_blocks_per_sm` > 0: compiled for that many resident programs per SM (__launch_bounds__ caps the registers;
    lab/h200_rmsnorm_tilelang.py measures it), else the compiler's choice."""
    import tilelang.language as T

    eps = spec.EPS
    row_bytes = hidden * ITEMSIZE[dtype]

    @T.prim_func
    def rmsnorm(X: T.Tensor((tokens, hidden), dtype), W: T.Tensor((hidden,), dtype),
                Y: T.Tensor((tokens, hidden), dtype)):
        with T.Kernel(T.ceildiv(tokens, block_rows), threads=threads) as bx:
            if min_blocks_per_sm > 0:
                T.annotate_min_blocks_per_sm(min_blocks_per_sm)
            x = T.alloc_fragment((block_rows, hidden), "float32")
            sq = T.alloc_fragment((block_rows, hidden), "float32")
            total = T.alloc_fragment((block_rows,), "float32")
            if prefetch_ahead > 0:
                T.import_source(_L2_PREFETCH)
                tx = T.get_thread_binding(0)
                ahead = (bx + prefetch_ahead) * block_rows
                if tx < block_rows and ahead + tx < tokens:
                    T.call_extern("handle", "l2_prefetch_bulk", T.access_ptr(X[ahead + tx, 0], "r"), row_bytes)
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
        device, "rmsnorm", lambda: _config(workload["hidden"], variant, device, aot.sm_count),
        lambda config: _kernel(workload["tokens"], workload["hidden"], dtype, **config))

    def rmsnorm(x, weight, out):
        kernel(x, weight, out)

    return Built(rmsnorm, config)


def compile_for(workload, dtype, device, variant):
    config = _config(workload["hidden"], variant, device, aot.known_sm_count)
    func = _kernel(workload["tokens"], workload["hidden"], dtype, **config)
    return aot.tilelang_compile_for(func, device, config)
