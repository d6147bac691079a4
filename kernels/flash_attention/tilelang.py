"""TileLang flash attention forward (the online-softmax technique of TileLang's flash-attention example, written
here): a program per (query block, head, batch); K and V stream through shared memory in a software pipeline;
S = Q K^T and O += P V on the tensor cores (T.gemm); running max and sum in fp32 registers. Causal programs stop
at their diagonal; columns past the sequence end are masked. GPU only (no CPU lowering).

Variants:
- `fixed` (_config: 128x64 blocks, 2 stages, 256 threads): every K/V block builds its -inf/0 mask before QK^T. On
  AMD 64x64 blocks: at 128x64 the build for gfx942 takes 67,584 bytes of LDS, past the 64 KiB a workgroup may
  have (it would not launch), at 64x64 51,200 (reports/20261207-cpu-gfx942-builds/NOTES.md).
- `fa3` (issue 14): FlashAttention-3's Hopper design, its warp roles written out (TileLang 0.1.15 has no
  annotation for the schedule: the `T.Pipelined(order=, stage=)` examples that expressed it were removed with its
  automatic producer/consumer warp specialisation, and given such annotations its loop is still emitted in program
  order, checked for sm_90a). 384 threads: a TMA producer warpgroup (24 registers by setmaxnreg) loads Q once
  and K/V blocks into two stages guarded by full/empty mbarriers; two consumer warpgroups (240 registers) of 64
  query rows each. Intra-warpgroup overlap: per block k a consumer issues S = Q K_k^T and O += P_{k-1} V_{k-1}
  (T.wgmma_gemm, P from registers), waits for the first only (T.wait_wgmma(1)), runs block k's mask and online
  softmax on the CUDA cores while the tensor cores finish P V, then waits, rescales O and converts S to P.
  Ping-pong: named barriers make the two warpgroups take turns issuing, so one's softmax runs under the other's
  GEMMs. exp2 with log2(e) folded into the scale, fast math; the mask only on blocks that need one (a branch
  uniform per program); the causal loop stops at the diagonal. K/V blocks of 128 columns, 176 with a causal mask
  (_fa3_config). Built with TileLang's own warp specialisation off (the roles are written out).
  Causal programs run the longest query blocks first (`lpt`: faster on the causal 8192-token shape).
  Epilogue (`tma_epilogue`): O is written to shared memory over Q's tile and leaves by one TMA store; storing it
  from registers was slower at batch 8, where each program has only 32 K/V blocks to spread it over.
  Against cuDNN's SDPA on the H200, paired: reports/20261201-h200-flash-fa3-c and -flash-fa3-b8-repeat (summed up
  in docs/results.md); it is well ahead of the design it replaced (TileLang's automatic warp specialisation, no
  overlap; reports/20261201-h200-tilelang-flash-sweep).
- `tuned`: TileLang's autotuner picks per workload (opmatrix.kit.tune tunes twice and records whether the choice
  held) among `fa3`'s design choices (_TUNE_SPACE; always with the TMA epilogue): K/V blocks of 128 or 176
  columns (wider blocks issue fewer, larger wgmmas and cross the causal diagonal less often; a sequence not a
  multiple of 176 gets a masked ragged block), 2 or 3 K/V stages at 128 columns (3 x 2 x 32 KiB + Q fit the
  227 KiB of shared memory; 176 columns fit only 2), ping-pong on or off. 6 configurations. compile_for builds
  `fa3`'s configuration.
"""
from opmatrix.kit import Built, Unsupported, aot, load_spec, tune

spec = load_spec(__file__)
VARIANTS = ("fixed", "fa3", "tuned")
_CONFIG = {"block_M": 128, "block_N": 64, "num_stages": 2, "threads": 256}
_AMD_CONFIG = dict(_CONFIG, block_M=64)  # 64 KiB of LDS a workgroup on gfx9 (CDNA), against 227 KiB on Hopper


def _config(device) -> dict:
    """`fixed`'s blocks on this device."""
    return _AMD_CONFIG if device.vendor == "amd" else _CONFIG
_TUNE_SPACE = [dict(block_N=bn, stages=st, pingpong=pp) for bn, st in ((128, 2), (128, 3), (176, 2))
               for pp in (False, True)]
# fast math (exp2f -> ex2.approx); TileLang's own warp specialisation off: `fa3` writes its warp roles out
_FA3_PASSES = {"tl.enable_fast_math": True, "tl.disable_warp_specialized": True}
# named barriers (0 is __syncthreads; TileLang inserts some of its own, numbered 3 in the sm_90a builds checked,
# e.g. before `tma_epilogue` overwrites Q's tile, so ours stay clear of the low numbers):
_TURN = 8  # 8 and 9: "consumer warpgroup 0's / 1's turn to issue"
_EPILOGUE = 10  # both consumer warpgroups have written O to shared memory
_LOG2E = 1.4426950408889634


def _online_softmax(scale, block_M, block_N):
    """The online softmax of a (block_M, block_N) block of scores S (exp2 of the scores times `scale`), shared by
    `fixed` and `fa3` as two macros, because each rescales O between them at its own point:
    `raise_max(S, m, m_prev, alpha)`: the running row max m takes in S's rows; alpha = exp2((m_prev - m) * scale),
    the factor that rescales what was summed under the old max.
    `exponentiate(S, m, alpha, row_sum, total)`: S becomes exp2((S - m) * scale) and the running row sum
    total = total * alpha + the rows of S."""
    import tilelang.language as T

    @T.macro
    def raise_max(S, m, m_prev, alpha):
        T.copy(m, m_prev)
        T.reduce_max(S, m, dim=1, clear=False)
        for i in T.Parallel(block_M):
            alpha[i] = T.exp2(m_prev[i] * scale - m[i] * scale)

    @T.macro
    def exponentiate(S, m, alpha, row_sum, total):
        for i, j in T.Parallel(block_M, block_N):
            S[i, j] = T.exp2(S[i, j] * scale - m[i] * scale)
        T.reduce_sum(S, row_sum, dim=1)
        for i in T.Parallel(block_M):
            total[i] = total[i] * alpha[i] + row_sum[i]

    return raise_max, exponentiate


def _kernel(batch, heads, seq, dim, causal, dtype, block_M, block_N, num_stages, threads):
    import tilelang.language as T

    shape = (batch, heads, seq, dim)
    scale = spec.softmax_scale(dim) * _LOG2E  # softmax through exp2
    neg_inf = -T.infinity("float32")
    raise_max, exponentiate = _online_softmax(scale, block_M, block_N)

    @T.prim_func
    def attention(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                  O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_s = T.alloc_shared((block_M, dim), dtype)
            K_s = T.alloc_shared((block_N, dim), dtype)
            V_s = T.alloc_shared((block_N, dim), dtype)
            O_s = T.alloc_shared((block_M, dim), dtype)
            S = T.alloc_fragment((block_M, block_N), "float32")
            P = T.alloc_fragment((block_M, block_N), dtype)
            acc = T.alloc_fragment((block_M, dim), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            m_prev = T.alloc_fragment((block_M,), "float32")
            alpha = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            total = T.alloc_fragment((block_M,), "float32")

            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], Q_s)
            T.fill(acc, 0)
            T.fill(total, 0)
            T.fill(m, neg_inf)
            steps = (T.min(T.ceildiv(seq, block_N), T.ceildiv((bx + 1) * block_M, block_N)) if causal
                     else T.ceildiv(seq, block_N))
            for k in T.Pipelined(steps, num_stages=num_stages):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], K_s)
                for i, j in T.Parallel(block_M, block_N):  # T.gemm accumulates: start from the mask
                    keep = k * block_N + j < seq
                    if causal:
                        keep = keep and (bx * block_M + i >= k * block_N + j)
                    S[i, j] = T.if_then_else(keep, 0, neg_inf)
                T.gemm(Q_s, K_s, S, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                raise_max(S, m, m_prev, alpha)
                for i, j in T.Parallel(block_M, dim):
                    acc[i, j] *= alpha[i]
                exponentiate(S, m, alpha, row_sum, total)
                T.copy(S, P)
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], V_s)
                T.gemm(P, V_s, acc, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc[i, j] /= total[i]
            T.copy(acc, O_s)
            T.copy(O_s, O[bz, by, bx * block_M:(bx + 1) * block_M, :])

    return attention


def _fa3_kernel(batch, heads, seq, dim, causal, dtype, block_N, stages, pingpong, lpt=False, block_M=128,
                tma_epilogue=False):
    """One TMA producer warpgroup (Q once; K and V blocks into `stages` stages, each with a full and an empty
    mbarrier) and two consumer warpgroups of 64 query rows each. Per block k the consumers issue S = Q K_k^T and
    then O += P_{k-1} V_{k-1} (P from registers), wait for the first (wait_wgmma(1)), run the masking and the online
    softmax of block k while the second is in flight, then wait for it, rescale O and convert S to P. The first
    block is peeled: a loop whose first trip issues one batch and its others two makes ptxas serialise every wgmma
    (C7514; tests/cells/test_compile_only_cells.py builds it for sm_90a and reads ptxas' report).
    `pingpong`: FA3's scheduling between the two consumer warpgroups on top: a warpgroup issues its wgmmas only
    after the other has issued its own (two named barriers, bar.sync / bar.arrive), so one warpgroup's softmax
    runs while the other's GEMMs hold the tensor cores.
    `lpt`: query blocks launch in reverse order, the longest causal rows first, so the grid's last wave holds
    the short ones (FA3's longest-processing-time-first order, here as the launch order).
    `tma_epilogue`: O is written to shared memory (over Q's tile: each consumer warpgroup overwrites its own query
    rows, which its last Q K^T has finished reading) and stored by one TMA store, instead of from registers."""
    import tilelang.language as T

    shape = (batch, heads, seq, dim)
    scale = spec.softmax_scale(dim) * _LOG2E  # softmax through exp2
    neg_inf = -T.infinity("float32")
    n_blocks = -(-seq // block_N)
    needs_mask = causal or seq % block_N != 0
    full_row = T.GemmWarpPolicy.FullRow
    raise_max, exponentiate = _online_softmax(scale, block_M, block_N)

    @T.macro
    def softmax(k, bx, S, m, m_prev, alpha, row_sum, total):
        if needs_mask:
            first_masked = bx * block_M // block_N if causal else n_blocks - 1
            if k >= first_masked:  # uniform per program: the diagonal (causal) or the ragged last block only
                for i, j in T.Parallel(block_M, block_N):
                    keep = k * block_N + j < seq
                    if causal:
                        keep = keep and (bx * block_M + i >= k * block_N + j)
                    S[i, j] = T.if_then_else(keep, S[i, j], neg_inf)
        raise_max(S, m, m_prev, alpha)
        exponentiate(S, m, alpha, row_sum, total)

    @T.macro
    def await_turn(wg):  # ping-pong: wait until the other consumer warpgroup has issued its wgmmas
        if pingpong:
            T.sync_threads(_TURN + wg, 256)

    @T.macro
    def pass_turn(wg, last=False):  # ping-pong: the other warpgroup may issue now
        if pingpong:
            if not last:
                T.named_barrier_arrive(_TURN + 1 - wg, 256)
            elif wg == 0:  # warpgroup 1's last turn; its own last arrival would have no taker
                T.named_barrier_arrive(_TURN + 1, 256)

    @T.prim_func
    def attention(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                  O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq, block_M), heads, batch, threads=384) as (launch_x, by, bz):
            bx = T.ceildiv(seq, block_M) - 1 - launch_x if lpt else launch_x  # lpt: the longest causal rows first
            Q_s = T.alloc_shared((block_M, dim), dtype)
            K_s = T.alloc_shared((stages, block_N, dim), dtype)
            V_s = T.alloc_shared((stages, block_N, dim), dtype)
            S = T.alloc_fragment((block_M, block_N), "float32")
            P = T.alloc_fragment((block_M, block_N), dtype)
            acc = T.alloc_fragment((block_M, dim), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            m_prev = T.alloc_fragment((block_M,), "float32")
            alpha = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            total = T.alloc_fragment((block_M,), "float32")
            q_full = T.alloc_barrier([128])
            k_full = T.alloc_barrier([128] * stages)  # the producer warpgroup's arrivals, plus the TMA bytes
            v_full = T.alloc_barrier([128] * stages)
            k_empty = T.alloc_barrier([256] * stages)  # both consumer warpgroups' arrivals
            v_empty = T.alloc_barrier([256] * stages)
            tx = T.get_thread_binding()
            steps = T.min(n_blocks, T.ceildiv((bx + 1) * block_M, block_N)) if causal else n_blocks
            wg = (tx - 128) // 128  # consumer warpgroup 0 or 1 (the producer's value is never used)
            if tx < 128:
                T.dec_max_nreg(24)
                T.tma_copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], Q_s, barrier=q_full[0])
                T.barrier_arrive(q_full[0])
                for k in T.serial(steps):
                    T.barrier_wait(k_empty[k % stages], ((k // stages) % 2) ^ 1)
                    T.tma_copy(K[bz, by, k * block_N:(k + 1) * block_N, :], K_s[k % stages, :, :],
                               barrier=k_full[k % stages])
                    T.barrier_arrive(k_full[k % stages])
                    T.barrier_wait(v_empty[k % stages], ((k // stages) % 2) ^ 1)
                    T.tma_copy(V[bz, by, k * block_N:(k + 1) * block_N, :], V_s[k % stages, :, :],
                               barrier=v_full[k % stages])
                    T.barrier_arrive(v_full[k % stages])
            else:
                T.inc_max_nreg(240)
                T.fill(acc, 0)
                T.fill(total, 0)
                T.fill(m, neg_inf)
                T.barrier_wait(q_full[0], 0)
                T.barrier_wait(k_full[0], 0)
                if pingpong:
                    if wg == 1:  # warpgroup 0 issues first
                        T.named_barrier_arrive(_TURN, 256)
                await_turn(wg)
                T.wgmma_gemm(Q_s, K_s[0, :, :], S, transpose_B=True, clear_accum=True, policy=full_row)
                pass_turn(wg)
                T.wait_wgmma(0)
                T.barrier_arrive(k_empty[0])
                softmax(0, bx, S, m, m_prev, alpha, row_sum, total)
                T.copy(S, P)
                for k in T.serial(1, steps):
                    T.barrier_wait(k_full[k % stages], (k // stages) % 2)
                    T.barrier_wait(v_full[(k - 1) % stages], ((k - 1) // stages) % 2)
                    await_turn(wg)
                    T.wgmma_gemm(Q_s, K_s[k % stages, :, :], S, transpose_B=True, clear_accum=True,
                                 policy=full_row)
                    T.wgmma_gemm(P, V_s[(k - 1) % stages, :, :], acc, policy=full_row)
                    pass_turn(wg)
                    T.wait_wgmma(1)  # S is done; P V may still run
                    T.barrier_arrive(k_empty[k % stages])
                    softmax(k, bx, S, m, m_prev, alpha, row_sum, total)
                    T.wait_wgmma(0)  # P V is done: P and O may be rewritten, V's stage released
                    T.barrier_arrive(v_empty[(k - 1) % stages])
                    for i, j in T.Parallel(block_M, dim):
                        acc[i, j] *= alpha[i]
                    T.copy(S, P)
                last = steps - 1
                T.barrier_wait(v_full[last % stages], (last // stages) % 2)
                await_turn(wg)
                T.wgmma_gemm(P, V_s[last % stages, :, :], acc, policy=full_row)
                pass_turn(wg, last=True)
                T.wait_wgmma(0)
                T.barrier_arrive(v_empty[last % stages])
                for i, j in T.Parallel(block_M, dim):
                    acc[i, j] /= total[i]
                if tma_epilogue:
                    T.copy(acc, Q_s)
                    T.fence_proxy_async()  # the tile's writes, seen by the TMA unit
                    T.sync_threads(_EPILOGUE, 256)
                    T.tma_copy(Q_s, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
                    T.tma_store_wait(0)
                else:
                    T.copy(acc, O[bz, by, bx * block_M:(bx + 1) * block_M, :])

    return attention


def _func(workload, dtype, config):
    return _kernel(workload["batch"], workload["heads"], workload["seq"], workload["head_dim"], workload["causal"],
                   dtype, **config)


def _fa3_config(workload) -> dict:
    """FA3's choices for head_dim 128 as measured on the H200 (reports/20261201-h200-tilelang-flash-sweep/NOTES.md):
    128-column K/V blocks without a causal mask (176 was slower there), 176 with one (faster); two K/V stages;
    ping-pong between the consumer warpgroups (no gain or loss measured); causal programs longest first; O stored
    by TMA (faster at batch 8)."""
    causal = workload["causal"]
    return {"block_N": 176 if causal else 128, "stages": 2, "pingpong": True, "lpt": causal, "tma_epilogue": True}


def _fa3_func(workload, dtype, config):
    return _fa3_kernel(workload["batch"], workload["heads"], workload["seq"], workload["head_dim"],
                       workload["causal"], dtype, **config)


def _tuning_program(batch, heads, seq, dim, causal, dtype):
    """Scalars only: TileLang's autotuner keys its cache on the closure's contents and refuses a dict."""
    def attention_program(block_N=128, stages=2, pingpong=True):
        return _fa3_kernel(batch, heads, seq, dim, causal, dtype, block_N, stages, pingpong, tma_epilogue=True)

    return attention_program


def _require_hopper(device, variant) -> None:
    if device.vendor != "nvidia" or device.arch != "sm_90":
        raise Unsupported(f"`{variant}` is written for Hopper (sm_90a): wgmma, TMA and setmaxnreg; "
                          f"`fixed` is the portable kernel")


def build(workload, dtype, device, variant):
    import tilelang

    if not device.is_gpu:
        raise Unsupported("no CPU implementation of flash attention in TileLang (shared memory, T.gemm)")
    if dtype == "float32":
        raise Unsupported("the tensor-core kernel takes fp16/bf16 inputs")
    target = aot.tilelang_target(device)
    if variant == "fixed":
        kernel = tilelang.compile(_func(workload, dtype, _config(device)), target=target)
        config = dict(_config(device), target=target)
    elif variant == "tuned":
        _require_hopper(device, variant)
        program = _tuning_program(workload["batch"], workload["heads"], workload["seq"], workload["head_dim"],
                                  workload["causal"], dtype)
        kernel, record = tune.tilelang_autotune(program, _TUNE_SPACE, target, pass_configs=_FA3_PASSES)
        config = dict(record, target=target, fast_math=True)
    else:
        _require_hopper(device, variant)
        fa3 = _fa3_config(workload)
        kernel = tilelang.compile(_fa3_func(workload, dtype, fa3), target=target, pass_configs=_FA3_PASSES)
        config = dict(fa3, target=target, fast_math=True)

    def attention(q, k, v, out):
        kernel(q, k, v, out)

    return Built(attention, config)


def compile_for(workload, dtype, device, variant):
    """`fixed` for any GPU target; `fa3` and `tuned` (the tuner needs the GPU: `fa3`'s configuration) for Hopper."""
    if dtype == "float32":
        raise Unsupported("the tensor-core kernel takes fp16/bf16 inputs")
    if variant == "fixed":
        return aot.tilelang_compile_for(_func(workload, dtype, _config(device)), device, _config(device))
    _require_hopper(device, variant)
    fa3 = _fa3_config(workload)
    return aot.tilelang_compile_for(_fa3_func(workload, dtype, fa3), device, dict(fa3, fast_math=True),
                                    pass_configs=_FA3_PASSES)
