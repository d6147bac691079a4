"""TileLang, two implementations, because one does not cover both kinds of device:

- `tile` (NVIDIA CUDA / AMD HIP): shared-memory tiles, a software-pipelined K loop and T.gemm (wgmma on Hopper),
  relu applied to the register accumulator before one store. Fixed tile 128x256x64, 3 stages, 256 threads.
- `tuned`: the same kernel, its tile sizes, stages, threads and rasterisation chosen by TileLang's autotuner on
  the device for each workload (opmatrix.kit.tune: tuned twice, the config record says whether the choice held).
- `cpu` (TileLang's "c" target, cython execution): the GPU version has no CPU lowering (shared memory, thread
  fragments, T.gemm), so the CPU needs its own kernel: local buffers and T.grid loops, fp32 only.
"""
from opmatrix.kit import Built, Unsupported, aot, tune

VARIANTS = ("tile", "tuned", "cpu")

_TILE_CONFIG = {"block_M": 128, "block_N": 256, "block_K": 64, "num_stages": 3, "threads": 256, "swizzle": 10}
# (block_M, block_N, block_K, stages, threads), each with and without threadblock rasterisation
_TUNE_SPACE = [dict(block_M=bm, block_N=bn, block_K=bk, num_stages=st, threads=th, swizzle=sw)
              for bm, bn, bk, st, th in ((128, 256, 64, 3, 256), (128, 256, 64, 4, 256), (128, 128, 64, 3, 256),
                                         (128, 128, 64, 4, 128), (256, 128, 64, 3, 256), (128, 256, 32, 4, 256))
              for sw in (10, 0)]
_CPU_CONFIG = {"block_M": 32, "block_N": 32, "block_K": 32}


def _tile_kernel(M, N, K, dtype, block_M, block_N, block_K, num_stages, threads, swizzle):
    import tilelang.language as T

    @T.prim_func
    def gemm_relu(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.use_swizzle(panel_size=max(swizzle, 1), enable=swizzle > 0)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[ko * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] = T.max(acc[i, j], 0)
            T.copy(acc, C[by * block_M, bx * block_N])

    return gemm_relu


def _cpu_kernel(M, N, K, dtype, block_M, block_N, block_K):
    import tilelang.cpu.language as T

    @T.prim_func
    def gemm_relu(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            A_l = T.alloc_local((block_M, block_K), dtype)
            B_l = T.alloc_local((block_K, block_N), dtype)
            acc = T.alloc_local((block_M, block_N), dtype)
            T.clear(acc)
            for ko in range(T.ceildiv(K, block_K)):
                for i, k in T.grid(block_M, block_K):
                    A_l[i, k] = T.if_then_else((by * block_M + i < M) and (ko * block_K + k < K),
                                               A[by * block_M + i, ko * block_K + k], T.cast(0, dtype))
                for k, j in T.grid(block_K, block_N):
                    B_l[k, j] = T.if_then_else((ko * block_K + k < K) and (bx * block_N + j < N),
                                               B[ko * block_K + k, bx * block_N + j], T.cast(0, dtype))
                for i, j, k in T.grid(block_M, block_N, block_K):
                    acc[i, j] += A_l[i, k] * B_l[k, j]
            for i, j in T.grid(block_M, block_N):
                if by * block_M + i < M and bx * block_N + j < N:
                    C[by * block_M + i, bx * block_N + j] = T.max(acc[i, j], T.cast(0, dtype))

    return gemm_relu


def _tuning_program(M, N, K, dtype):
    def gemm_relu_program(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256, swizzle=10):
        return _tile_kernel(M, N, K, dtype, block_M, block_N, block_K, num_stages, threads, swizzle)

    return gemm_relu_program


def build(workload, dtype, device, variant):
    import tilelang

    M, N, K = workload["M"], workload["N"], workload["K"]
    if variant == "cpu":
        if device.is_gpu:
            raise Unsupported("the 'cpu' variant targets TileLang's C backend; GPUs use variant 'tile'")
        if dtype != "float32":
            raise Unsupported(f"the CPU C-target kernel is fp32 only, not {dtype}")
        kernel = tilelang.compile(_cpu_kernel(M, N, K, dtype, **_CPU_CONFIG), target="c",
                                  execution_backend="cython")
        config = _CPU_CONFIG
    else:
        if not device.is_gpu:
            raise Unsupported(f"the '{variant}' kernel (shared memory, thread fragments, T.gemm) has no CPU lowering; "
                              "the CPU needs the separate 'cpu' implementation")
        target = aot.tilelang_target(device)
        if variant == "tuned":
            kernel, record = tune.tilelang_autotune(_tuning_program(M, N, K, dtype), _TUNE_SPACE, target)
            config = dict(record, target=target)
        else:
            kernel = tilelang.compile(_tile_kernel(M, N, K, dtype, **_TILE_CONFIG), target=target)
            config = dict(_TILE_CONFIG, target=target)

    def gemm_relu(a, b, out):
        kernel(a, b, out)

    return Built(gemm_relu, config)


def compile_for(workload, dtype, device, variant):
    """No host has the device: build the CUDA binary, or for AMD without hipcc lower to HIP source."""
    if variant == "cpu" or not device.is_gpu:
        raise Unsupported("the 'cpu' variant is the CPU's implementation; compile-only builds are for GPUs")
    # 'tuned' is the same kernel source; with no device to time candidates on, its fixed configuration is built
    func = _tile_kernel(workload["M"], workload["N"], workload["K"], dtype, **_TILE_CONFIG)
    return aot.tilelang_compile_for(func, device, _TILE_CONFIG)
