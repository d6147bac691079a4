"""TileLang, three implementations for GPUs and one for the CPU, because one does not cover every device:

- `tile` (NVIDIA CUDA / AMD HIP): shared-memory tiles, a software-pipelined K loop and T.gemm (wgmma on Hopper),
  relu applied to the register accumulator before one store straight from registers to C. Fixed tile 128x256x64,
  3 stages, 256 threads. On sm_90a TileLang 0.1.15 warp-specialises it by itself: the generated CUDA has 384
  threads (one TMA producer warpgroup, two wgmma consumer warpgroups of 128x128 each, setmaxnreg 24/240); its
  epilogue stores 4 bytes per thread per row straight from the accumulator (C is never staged in shared memory).
- `ws` (NVIDIA Hopper; issue 14): the same producer/consumer main loop in a persistent kernel: one CTA per SM
  (T.Persistent, grouped tile order for L2 reuse) walks the output tiles, so the producer warpgroup's TMA loads of
  the next tile overlap the consumers' epilogue of this one; the epilogue applies relu while writing the
  accumulator to a swizzled shared tile, then one TMA store per tile (cp.async.bulk.tensor) writes C in full
  lines. The register split is explicit (T.annotate_producer_reg_dealloc(24) / consumer_reg_alloc(240)); without
  it TileLang 0.1.15 leaves setmaxnreg out of the persistent kernel. Config 128x256x64, 3 stages (144 KB of A/B
  stages + 64 KB for C), 256 consumer threads, tile groups of 8 rows, and T.gemm's FullRow warp policy: each
  consumer warpgroup computes 64x256 with one m64n256 wgmma per k-step (TileLang's default Square policy gives
  each 128x128, two m64n128 wgmmas that read B twice). On the H200, interleaved rounds at 4096^3: 1.02x [1.01,
  1.02] (fp16) and 1.03x [1.02, 1.04] (bf16) of eager with FullRow against 0.99x and 1.01x with Square; at 8192^3
  both ~1.00x (reports/20261201-h200-tilelang-gemm-sweep, tools/h200_tilelang_gemm_sweep.py).
  compile_for builds it for sm_90a; the generated CUDA has wgmma (m64n256k16), tl::tma_load, tl::tma_store and
  setmaxnreg. With Square in a matrix run: 0.99-1.02x at 4096^3, cuBLASLt 1.07x (reports/*-decide-aa-a).
- `tuned`: TileLang's autotuner chooses per workload between both designs and their tile shapes
  (opmatrix.kit.tune: tuned twice, the config record says whether the choice held). Search space (_TUNE_SPACE):
  `tile` at 128x256x64 (3, 4 stages), 256x128x64 (3), 128x128x64 (4, 5 stages), 128x256x32 (4), each with
  rasterisation panels 10 and off: the tile shape trades wgmma size against wave quantisation (4096^2 has 512
  128x256 tiles: 3.9 waves on 132 SMs) and the stages hide HBM latency; and `ws` at 128x256x64 (3 stages),
  256x128x64 (3), 128x128x64 (5), 128x256x32 (5), tile groups 8 and 16 (all within 227 KB of shared memory with
  the C tile): the persistent walk and TMA-store epilogue against the plain grid; these with the Square warp
  policy, and 128x256x64 (3) with FullRow as well (the `ws` configuration). 22 configurations.
  `compile_for` builds its default (the `tile` configuration), there being no device to time candidates on.
- `cpu` (TileLang's "c" target, cython execution): the GPU version has no CPU lowering (shared memory, thread
  fragments, T.gemm), so the CPU needs its own kernel: local buffers and T.grid loops, fp32 only.
"""
from opmatrix.kit import Built, Unsupported, aot, tune

VARIANTS = ("tile", "ws", "tuned", "cpu")

_TILE_CONFIG = {"block_M": 128, "block_N": 256, "block_K": 64, "num_stages": 3, "threads": 256, "swizzle": 10}
_WS_CONFIG = {"block_M": 128, "block_N": 256, "block_K": 64, "num_stages": 3, "threads": 256, "group": 8,
              "policy": "full_row"}
_SM_COUNT = {"sm_90": 132}  # compile-only builds: persistent grids are sized for the device's SMs (H100/H200)
# (design, block_M, block_N, block_K, stages, raster): raster is the panel size for `tile`, the group for `ws`
_TUNE_SPACE = ([dict(persistent=False, block_M=bm, block_N=bn, block_K=bk, num_stages=st, threads=256, raster=r)
                for bm, bn, bk, st in ((128, 256, 64, 3), (128, 256, 64, 4), (256, 128, 64, 3), (128, 128, 64, 4),
                                       (128, 128, 64, 5), (128, 256, 32, 4))
                for r in (10, 0)]
               + [dict(persistent=True, block_M=bm, block_N=bn, block_K=bk, num_stages=st, threads=256, raster=r)
                  for bm, bn, bk, st in ((128, 256, 64, 3), (256, 128, 64, 3), (128, 128, 64, 5), (128, 256, 32, 5))
                  for r in (8, 16)]
               + [dict(persistent=True, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256, raster=r,
                       policy="full_row") for r in (8, 16)])
_CPU_CONFIG = {"block_M": 32, "block_N": 32, "block_K": 32}


def _warp_policy(name):
    """How T.gemm splits the block over the consumer warpgroups: "square" (TileLang's default; at 128x256 each
    warpgroup computes 128x128 with two m64n128 wgmmas) or "full_row" (each warpgroup 64 rows x the full 256
    columns: one m64n256 wgmma, as CUTLASS's Hopper GEMMs do, reading each B column once per k-step)."""
    import tilelang.language as T

    return {"square": T.GemmWarpPolicy.Square, "full_row": T.GemmWarpPolicy.FullRow}[name]


def _tile_kernel(M, N, K, dtype, block_M, block_N, block_K, num_stages, threads, swizzle, policy="square"):
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
                T.gemm(A_s, B_s, acc, policy=_warp_policy(policy))
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] = T.max(acc[i, j], 0)
            T.copy(acc, C[by * block_M, bx * block_N])

    return gemm_relu


def _ws_kernel(M, N, K, dtype, block_M, block_N, block_K, num_stages, threads, group, sms, policy="square"):
    import tilelang.language as T

    @T.prim_func
    def gemm_relu(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(sms, threads=threads) as cta:
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_s = T.alloc_shared((block_M, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.annotate_producer_reg_dealloc(24)
            T.annotate_consumer_reg_alloc(240)
            for bm, bn in T.Persistent([T.ceildiv(M, block_M), T.ceildiv(N, block_N)], sms, cta, group_size=group):
                T.clear(acc)
                for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                    T.copy(A[bm * block_M, ko * block_K], A_s)
                    T.copy(B[ko * block_K, bn * block_N], B_s)
                    T.gemm(A_s, B_s, acc, policy=_warp_policy(policy))
                for i, j in T.Parallel(block_M, block_N):  # relu on the way to shared memory
                    C_s[i, j] = T.max(acc[i, j], 0)
                T.copy(C_s, C[bm * block_M, bn * block_N])  # one TMA store of the whole tile

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


def _tuning_program(M, N, K, dtype, sms):
    def gemm_relu_program(persistent=False, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256,
                          raster=10, policy="square"):
        if persistent:
            return _ws_kernel(M, N, K, dtype, block_M, block_N, block_K, num_stages, threads, raster, sms, policy)
        return _tile_kernel(M, N, K, dtype, block_M, block_N, block_K, num_stages, threads, raster, policy)

    return gemm_relu_program


def _known_sm_count(device) -> int:
    """The SM count of the device's arch (compile-only builds, where no such device is here)."""
    return _SM_COUNT.get(device.arch, 132)


def _sm_count(device) -> int:
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return _known_sm_count(device)


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
            kernel, record = tune.tilelang_autotune(_tuning_program(M, N, K, dtype, _sm_count(device)), _TUNE_SPACE,
                                                    target)
            config = dict(record, target=target)
        elif variant == "ws":
            _require_hopper(device, target)
            sms = _sm_count(device)
            kernel = tilelang.compile(_ws_kernel(M, N, K, dtype, sms=sms, **_WS_CONFIG), target=target)
            config = dict(_WS_CONFIG, sms=sms, target=target)
        else:
            kernel = tilelang.compile(_tile_kernel(M, N, K, dtype, **_TILE_CONFIG), target=target)
            config = dict(_TILE_CONFIG, target=target)

    def gemm_relu(a, b, out):
        kernel(a, b, out)

    return Built(gemm_relu, config)


def _require_hopper(device, target):
    if target.get("arch") not in ("sm_90a",):
        raise Unsupported(f"the 'ws' kernel is written for Hopper (TMA, wgmma, setmaxnreg: sm_90a), not {device.arch}")


def compile_for(workload, dtype, device, variant):
    """No host has the device: build the CUDA binary, or for AMD without hipcc lower to HIP source."""
    if variant == "cpu" or not device.is_gpu:
        raise Unsupported("the 'cpu' variant is the CPU's implementation; compile-only builds are for GPUs")
    M, N, K = workload["M"], workload["N"], workload["K"]
    if variant == "ws":
        _require_hopper(device, aot.tilelang_target(device))
        sms = _known_sm_count(device)
        return aot.tilelang_compile_for(_ws_kernel(M, N, K, dtype, sms=sms, **_WS_CONFIG), device,
                                        dict(_WS_CONFIG, sms=sms))
    # 'tuned' is the same kernel source; with no device to time candidates on, its fixed configuration is built
    return aot.tilelang_compile_for(_tile_kernel(M, N, K, dtype, **_TILE_CONFIG), device, _TILE_CONFIG)
