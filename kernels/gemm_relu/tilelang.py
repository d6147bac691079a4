"""TileLang, three implementations for GPUs and one for the CPU, because one does not cover every device:

- `tile` (NVIDIA CUDA / AMD HIP): shared-memory tiles, a software-pipelined K loop and T.gemm (wgmma on Hopper),
  relu applied to the register accumulator before one store straight from registers to C. Fixed tile 128x256x64,
  3 stages, 256 threads. On sm_90a TileLang 0.1.15 warp-specialises it by itself: the generated CUDA has 384
  threads (one TMA producer warpgroup, two wgmma consumer warpgroups of 128x128 each, setmaxnreg 24/240); its
  epilogue stores 4 bytes per thread per row straight from the accumulator (C is never staged in shared memory).
- `ws` (NVIDIA Hopper; issue 14): persistent and warp-specialised, its roles written out (_ws_kernel): one CTA of
  384 threads per SM walks the output tiles (groups of 8 tile rows walked column by column, for L2 reuse of B); a
  TMA producer warpgroup (24 registers by setmaxnreg) fills 3 stages of 128x64 A and 64x256 B guarded by full and
  empty mbarriers; two consumer warpgroups (240 registers) each compute 64x256 with one m64n256 wgmma per k-step
  (FullRow), keep one wgmma batch in flight and release a stage once its wgmmas are done. The epilogue applies
  relu in registers, writes the tile to a swizzled shared tile and issues one asynchronous TMA store; the
  consumers start the next tile's main loop while it drains and wait for it (wait_group.read) only before writing
  the next tile. That asynchronous store is what closed the gap to cuBLASLt: the same loop storing C from
  registers, and TileLang's own warp specialisation (which waits for its TMA store at once), were slower
  (reports/20261201-h200-tilelang-gemm-sweep). What it measured on the H200, paired against eager, cuBLASLt and
  CUTLASS: reports/20261201-h200-gemm-ws/NOTES.md (summed up in docs/results.md).
  TMA needs 16-byte row strides: K and N must be multiples of 8 (fp16/bf16), else `ws` is refused with that
  reason (`tile` takes any shape); partial tiles at the edges are zero-filled by the loads and clipped by the
  store. Off 128-byte-aligned rows it is weaker (partial_tiles, 4000x3000x4040: behind eager and cuBLASLt, with
  more L2 traffic per FLOP in Nsight Compute; reports/20261201-h200-gemm-ws/NOTES.md).
  compile_for builds it for sm_90a; the generated CUDA has wgmma (m64n256k16), tl::tma_load, tl::tma_store and
  setmaxnreg.
- `tuned`: TileLang's autotuner chooses per workload between both designs and their tile shapes
  (opmatrix.kit.tune: tuned twice, the config record says whether the choice held). Search space (_TUNE_SPACE):
  `tile` at 128x256x64 (3, 4 stages), 256x128x64 (3), 128x128x64 (4, 5 stages), 128x256x32 (4), each with
  rasterisation panels 10 and off: the tile shape trades wgmma size against wave quantisation (4096^2 has 512
  128x256 tiles: 3.9 waves on 132 SMs) and the stages hide HBM latency; and `ws` at 128x256x64 (3 stages),
  256x128x64 (3), 128x128x64 (5), 128x256x32 (5) with FullRow and 128x256x64 (3) with Square, tile groups 8 and
  16 (all within 227 KB of shared memory with the C tile): the persistent walk and asynchronous TMA-store
  epilogue against the plain grid. 22 configurations; `ws` ones are left out where its TMA copies cannot run.
  `compile_for` builds its default (the `tile` configuration), there being no device to time candidates on.
- `cpu` (TileLang's "c" target, cython execution): the GPU version has no CPU lowering (shared memory, thread
  fragments, T.gemm), so the CPU needs its own kernel: local buffers and T.grid loops, fp32 only.
"""
from opmatrix.kit import ITEMSIZE, Built, Unsupported, aot, tune

VARIANTS = ("tile", "ws", "tuned", "cpu")

_TILE_CONFIG = {"block_M": 128, "block_N": 256, "block_K": 64, "num_stages": 3, "threads": 256, "swizzle": 10}
_WS_CONFIG = {"block_M": 128, "block_N": 256, "block_K": 64, "num_stages": 3, "group": 8, "policy": "full_row"}
# (design, block_M, block_N, block_K, stages, raster): raster is the panel size for `tile`, the group for `ws`
_TUNE_SPACE = ([dict(persistent=False, block_M=bm, block_N=bn, block_K=bk, num_stages=st, threads=256, raster=r)
                for bm, bn, bk, st in ((128, 256, 64, 3), (128, 256, 64, 4), (256, 128, 64, 3), (128, 128, 64, 4),
                                       (128, 128, 64, 5), (128, 256, 32, 4))
                for r in (10, 0)]
               + [dict(persistent=True, block_M=bm, block_N=bn, block_K=bk, num_stages=st, raster=r, policy="full_row")
                  for bm, bn, bk, st in ((128, 256, 64, 3), (256, 128, 64, 3), (128, 128, 64, 5), (128, 256, 32, 5))
                  for r in (8, 16)]
               + [dict(persistent=True, block_M=128, block_N=256, block_K=64, num_stages=3, raster=r,
                       policy="square") for r in (8, 16)])
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


_CONSUMERS = 1  # named barrier 1: the two consumer warpgroups (0 is __syncthreads; TileLang's own inserted one is 3)


def _ws_kernel(M, N, K, dtype, block_M, block_N, block_K, num_stages, group, sms, policy="full_row"):
    """Persistent and warp-specialised, the roles written out: `sms` CTAs of 384 threads walk the output tiles
    (groups of `group` tile rows walked column by column, for L2 reuse of B). The producer warpgroup (24
    registers) TMA-loads A and B blocks into `num_stages` stages, each with a full and an empty mbarrier; two
    consumer warpgroups (240 registers) issue the wgmmas. A consumer keeps one wgmma batch in flight and releases
    stage k-1 once at most one batch is pending. Epilogue: relu in registers, the tile written to shared memory,
    one asynchronous TMA store; the consumers go straight on to the next tile's main loop and wait for the store
    to have read the tile only before they write the next one (cp.async.bulk.wait_group.read). TMA fills loads
    past the matrix edges with zeros and clips stores there, so any M, N, K works."""
    import tilelang.language as T

    tiles_m, tiles_n, kt = -(-M // block_M), -(-N // block_N), -(-K // block_K)
    tiles = tiles_m * tiles_n
    waves = -(-tiles // sms)

    def tile_of(tile):  # (row, column) of output tile `tile`: row groups of `group`, the last one maybe shorter
        start = tile // (group * tiles_n) * group
        rows = T.min(group, tiles_m - start)
        within = tile - start * tiles_n
        return start + within % rows, within // rows

    @T.prim_func
    def gemm_relu(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(sms, threads=384) as cta:
            A_s = T.alloc_shared((num_stages, block_M, block_K), dtype)
            B_s = T.alloc_shared((num_stages, block_K, block_N), dtype)
            C_s = T.alloc_shared((block_M, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            full = T.alloc_barrier([128] * num_stages)  # the producer warpgroup's arrivals, plus the TMA bytes
            empty = T.alloc_barrier([256] * num_stages)  # both consumer warpgroups' arrivals
            tx = T.get_thread_binding()
            if tx < 128:
                T.dec_max_nreg(24)
                for w in T.serial(waves):
                    if w * sms + cta < tiles:
                        bm, bn = tile_of(w * sms + cta)
                        for ko in T.serial(kt):
                            it = w * kt + ko
                            T.barrier_wait(empty[it % num_stages], ((it // num_stages) % 2) ^ 1)
                            T.tma_copy(A[bm * block_M:(bm + 1) * block_M, ko * block_K:(ko + 1) * block_K],
                                       A_s[it % num_stages, :, :], barrier=full[it % num_stages])
                            T.tma_copy(B[ko * block_K:(ko + 1) * block_K, bn * block_N:(bn + 1) * block_N],
                                       B_s[it % num_stages, :, :], barrier=full[it % num_stages])
                            T.barrier_arrive(full[it % num_stages])
            else:
                T.inc_max_nreg(240)
                for w in T.serial(waves):
                    if w * sms + cta < tiles:
                        bm, bn = tile_of(w * sms + cta)
                        T.clear(acc)
                        for ko in T.serial(kt):
                            it = w * kt + ko
                            T.barrier_wait(full[it % num_stages], (it // num_stages) % 2)
                            T.wgmma_gemm(A_s[it % num_stages, :, :], B_s[it % num_stages, :, :], acc,
                                         policy=_warp_policy(policy))
                            T.wait_wgmma(1)  # k-1's wgmmas are done: its stage may be refilled
                            if ko > 0:
                                T.barrier_arrive(empty[(it - 1) % num_stages])
                        T.wait_wgmma(0)
                        T.barrier_arrive(empty[(w * kt + kt - 1) % num_stages])
                        for i, j in T.Parallel(block_M, block_N):
                            acc[i, j] = T.max(acc[i, j], 0)
                        T.tma_store_wait(0)  # the previous tile's store has read C_s
                        T.sync_threads(_CONSUMERS, 256)
                        T.copy(acc, C_s)
                        T.fence_proxy_async()  # the tile's writes, seen by the TMA unit
                        T.sync_threads(_CONSUMERS, 256)
                        T.tma_copy(C_s, C[bm * block_M:(bm + 1) * block_M, bn * block_N:(bn + 1) * block_N])
                T.tma_store_wait(0)  # the last store has read C_s before the CTA's shared memory goes

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
            return _ws_kernel(M, N, K, dtype, block_M, block_N, block_K, num_stages, raster, sms, policy)
        return _tile_kernel(M, N, K, dtype, block_M, block_N, block_K, num_stages, threads, raster, policy)

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
            ws_runs = _ws_refusal(device, target, K, N, dtype) is None
            space = [c for c in _TUNE_SPACE if ws_runs or not c["persistent"]]
            program = _tuning_program(M, N, K, dtype, aot.sm_count(device))
            kernel, record = tune.tilelang_autotune(program, space, target)
            config = dict(record, target=target)
        elif variant == "ws":
            _require_ws(device, target, K, N, dtype)
            sms = aot.sm_count(device)
            kernel = tilelang.compile(_ws_kernel(M, N, K, dtype, sms=sms, **_WS_CONFIG), target=target)
            config = dict(_WS_CONFIG, sms=sms, target=target)
        else:
            kernel = tilelang.compile(_tile_kernel(M, N, K, dtype, **_TILE_CONFIG), target=target)
            config = dict(_TILE_CONFIG, target=target)

    def gemm_relu(a, b, out):
        kernel(a, b, out)

    return Built(gemm_relu, config)


def _ws_refusal(device, target, K, N, dtype) -> str | None:
    """Why the `ws` kernel cannot run this build, or None: it is written for Hopper, and its TMA copies need the
    row strides of A (K elements) and of B and C (N elements) to be multiples of 16 bytes."""
    if target.get("arch") not in ("sm_90a",):
        return f"the 'ws' kernel is written for Hopper (TMA, wgmma, setmaxnreg: sm_90a), not {device.arch}"
    if (K * ITEMSIZE[dtype]) % 16 or (N * ITEMSIZE[dtype]) % 16:
        return (f"the 'ws' kernel moves A, B and C by TMA, which needs 16-byte row strides: K={K} and N={N} {dtype} "
                f"elements are not both multiples of {16 // ITEMSIZE[dtype]}; 'tile' takes any shape")
    return None


def _require_ws(device, target, K, N, dtype) -> None:
    refusal = _ws_refusal(device, target, K, N, dtype)
    if refusal:
        raise Unsupported(refusal)


def compile_for(workload, dtype, device, variant):
    """No host has the device: build the CUDA binary or the AMD code object (opmatrix.kit.amdgcn: v_mfma count,
    registers), or where that compiler is missing lower to HIP source."""
    if variant == "cpu" or not device.is_gpu:
        raise Unsupported("the 'cpu' variant is the CPU's implementation; compile-only builds are for GPUs")
    M, N, K = workload["M"], workload["N"], workload["K"]
    if variant == "ws":
        _require_ws(device, aot.tilelang_target(device), K, N, dtype)
        sms = aot.known_sm_count(device)
        return aot.tilelang_compile_for(_ws_kernel(M, N, K, dtype, sms=sms, **_WS_CONFIG), device,
                                        dict(_WS_CONFIG, sms=sms))
    # 'tuned' is the same kernel source; with no device to time candidates on, its fixed configuration is built
    return aot.tilelang_compile_for(_tile_kernel(M, N, K, dtype, **_TILE_CONFIG), device, _TILE_CONFIG)
