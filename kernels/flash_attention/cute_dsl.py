"""CuTe DSL flash attention forward: the online-softmax algorithm of kernels/flash_attention/gluon.py written with
CuTe's atoms. One CTA of 4 warps per `_BM` = 64 query rows of one (batch, head), each warp 16 of those rows, streams
K and V in `_BN` = 64-key tiles:

- global -> shared memory by cp.async (cute.nvgpu.cpasync.CopyG2SOp, 16 bytes a thread a copy) into swizzled
  tiles; one buffer each for Q, K and V, the loads of V(j) overlapping Q K(j)^T and of K(j+1) overlapping the
  softmax and P V(j) (cp.async commit / wait groups and a CTA barrier between them);
- shared memory -> registers by ldmatrix (V transposed by ldmatrix.trans), Q once for the whole loop;
- Q K^T and P V on the tensor cores as a tiled MMA of 4 warp-level mma.sync atoms (16 x 8 x 16,
  cute.nvgpu.warp.MmaF16BF16Op, fp32 accumulators); P goes from the scores' accumulator fragment to the A
  operand's by a layout view, never through memory;
- the online softmax in fp32 registers: exp2 with log2(e) folded into the scale, a row's max and sum met across
  the 4 threads that hold it by butterfly shuffles;
- causal in two loops, as gluon.py: key tiles wholly left of the query tile's diagonal without a mask, then the
  diagonal (and the tile past a ragged sequence's end) masked to -inf; tiles wholly right of it are never loaded.
  Rows of Q, K and V past the sequence's end are zero-filled in shared memory and O's are not stored, so any
  sequence length is covered.

What it is not: no TMA, no wgmma (Hopper) or tcgen05 / tensor memory (Blackwell), no warp specialisation, no
multi-stage pipeline, O stored straight from the accumulators (no shared-memory epilogue): the mma.sync first rung
that sm_90a and sm_100a also run. FlashAttention 4 (the flash-attn contestant, kernels/flash_attention/flash_attn.py)
is the tuned CuTe DSL flash attention.

16-bit inputs only (mma.sync's), head_dim 32, 64 or 128 (the swizzled tiles' widths; 128 x fp32 accumulators is the
register budget), NVIDIA only; other rows are refused with the reason. Compile-only builds for sm_90a / sm_100a over
fake tensors (opmatrix.kit.cute_dsl). Written and compiled on a CPU host: it has never run, and its numerics are
unchecked against the fp64 reference until a GPU run (CuTe DSL has no CPU mode)."""
import functools

from opmatrix.kit import Built, Unsupported, cute_dsl, load_spec, nvidia

spec = load_spec(__file__)

_BM, _BN = 64, 64  # query rows a CTA, keys a tile
_WARPS = 4
_THREADS = 32 * _WARPS
_HEAD_DIMS = (32, 64, 128)
_LOG2E = 1.4426950408889634  # exp(x) = exp2(x * log2(e))


@functools.cache
def _kernel():
    """The @cute.jit launcher and its @cute.kernel, made when first wanted (CuTe DSL is imported only then, so this
    file loads where it is not installed)."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.nvgpu import cpasync, warp

    f32 = cutlass.Float32

    def quad_reduce(value, op):
        """The 4 threads of an mma.sync row (lanes 4g .. 4g+3) hold its columns: op over them, in all four."""
        for offset in (1, 2):
            value = op(value, cute.arch.shuffle_sync_bfly(value, offset=offset))
        return value

    @cute.jit
    def load_rows(copy, src, dst, coords, seq):
        """cp.async of one thread's share of a tile; rows at or past `seq` are zero-filled instead."""
        for r in cutlass.range_constexpr(cute.size(dst, mode=[1])):
            if cute.elem_less(coords[0, r, 0][0], seq):
                cute.copy(copy, src[None, r, None], dst[None, r, None])
            else:
                dst[None, r, None].fill(0)

    @cute.jit
    def attend(n, n_end, m_block, seq, scale_log2, tiled_mma, g2s, gK, gV, sK, sV, tKcK, tSrQ, tSrK, s2r_k, tSsK,
               tSrK_view, tOrVt, s2r_v, tOsVt, tOrVt_view, tScS, acc_o, row_max, row_sum,
               masked: cutlass.Constexpr, causal: cutlass.Constexpr):
        """Key tile n: S = Q K(n)^T, the online-softmax update of (row_max, row_sum, acc_o), acc_o += P V(n); the
        mask only where `masked`. K(n) is in sK (or in flight) on entry; K(n+1) is in flight on return."""
        tidx, _, _ = cute.arch.thread_idx()
        thr_g2s = g2s.get_slice(tidx)
        cute.arch.cp_async_wait_group(0)
        cute.arch.barrier()  # K(n) landed for every thread; every warp is done with V(n-1)
        load_rows(g2s, thr_g2s.partition_S(gV[None, None, n]), thr_g2s.partition_D(sV), tKcK[None, None, None, n],
                  seq)
        cute.arch.cp_async_commit_group()

        acc_s = cute.make_rmem_tensor(tScS.shape, f32)
        acc_s.fill(0.0)
        for k in cutlass.range_constexpr(cute.size(tSsK, mode=[2])):
            cute.copy(s2r_k, tSsK[None, None, k], tSrK_view[None, None, k])
            cute.gemm(tiled_mma, acc_s, tSrQ[None, None, k], tSrK[None, None, k], acc_s)

        cute.arch.cp_async_wait_group(0)
        cute.arch.barrier()  # V(n) landed; every warp is done with K(n)
        if n + 1 < n_end:
            load_rows(g2s, thr_g2s.partition_S(gK[None, None, n + 1]), thr_g2s.partition_D(sK),
                      tKcK[None, None, None, n + 1], seq)
            cute.arch.cp_async_commit_group()

        # acc_s[(pair, half), m, j]: column 8 j + pair of row 16 m + 8 half (of this warp's rows); row i = half + 2 m
        mma_m, mma_n = cute.size(acc_s, mode=[1]), cute.size(acc_s, mode=[2])
        for m in cutlass.range_constexpr(mma_m):
            for half in cutlass.range_constexpr(2):
                i = half + 2 * m
                if cutlass.const_expr(masked):
                    row = m_block * _BM + tScS[(0, half), m, 0][0]
                    for j in cutlass.range_constexpr(mma_n):
                        for pair in cutlass.range_constexpr(2):
                            col = n * _BN + tScS[(pair, half), m, j][1]
                            hidden = col >= seq
                            if cutlass.const_expr(causal):
                                hidden = hidden | (col > row)
                            if hidden:
                                acc_s[(pair, half), m, j] = -f32.inf
                tile_max = -f32.inf
                for j in cutlass.range_constexpr(mma_n):
                    for pair in cutlass.range_constexpr(2):
                        tile_max = cute.arch.fmax(tile_max, acc_s[(pair, half), m, j])
                new_max = cute.arch.fmax(row_max[i], quad_reduce(tile_max, cute.arch.fmax))
                # a row with every score so far masked keeps -inf: exp2 against 0 gives it p = 0, not NaN
                base = f32(0.0) if new_max == -f32.inf else new_max * scale_log2
                alpha = cute.math.exp2(row_max[i] * scale_log2 - base, fastmath=True)
                total = f32(0.0)
                for j in cutlass.range_constexpr(mma_n):
                    for pair in cutlass.range_constexpr(2):
                        p = cute.math.exp2(acc_s[(pair, half), m, j] * scale_log2 - base, fastmath=True)
                        acc_s[(pair, half), m, j] = p
                        total = total + p
                row_sum[i] = row_sum[i] * alpha + total  # this thread's columns; the quad meets at the end
                row_max[i] = new_max
                for j in cutlass.range_constexpr(cute.size(acc_o, mode=[2])):
                    for pair in cutlass.range_constexpr(2):
                        acc_o[(pair, half), m, j] = acc_o[(pair, half), m, j] * alpha

        # P as mma.sync's A operand: the A fragment's (pair, half, k half) of k block b are the accumulator's
        # (pair, half) of column blocks 2 b and 2 b + 1, so a view of the 16-bit copy, no data movement
        r_p = cute.make_fragment_like(acc_s, tOrVt.element_type)
        r_p.store(acc_s.load().to(tOrVt.element_type))
        s = r_p.layout.stride
        t_p = cute.make_tensor(r_p.iterator, cute.make_layout(((2, 2, 2), mma_m, mma_n // 2),
                                                              stride=((s[0][0], s[0][1], s[2]), s[1], 2 * s[2])))
        for k in cutlass.range_constexpr(cute.size(tOsVt, mode=[2])):
            cute.copy(s2r_v, tOsVt[None, None, k], tOrVt_view[None, None, k])
            cute.gemm(tiled_mma, acc_o, t_p[None, None, k], tOrVt[None, None, k], acc_o)

    @cute.kernel
    def attention_kernel(mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mO: cute.Tensor,
                         scale_log2: cutlass.Constexpr, causal: cutlass.Constexpr, s_layout: cute.ComposedLayout,
                         g2s: cute.TiledCopy, tiled_mma: cute.TiledMma):
        tidx, _, _ = cute.arch.thread_idx()
        m_block, head, batch = cute.arch.block_idx()
        seq, d = mQ.shape[2], mQ.shape[3]
        dtype = mQ.element_type

        gQ = cute.local_tile(mQ[batch, head, None, None], (_BM, d), (m_block, 0))
        gK = cute.local_tile(mK[batch, head, None, None], (_BN, d), (None, 0))  # (BN, d, tile)
        gV = cute.local_tile(mV[batch, head, None, None], (_BN, d), (None, 0))
        gO = cute.local_tile(mO[batch, head, None, None], (_BM, d), (m_block, 0))
        ids = cute.make_identity_tensor((seq, d))  # (row, column) of every element, for the bounds
        cQ = cute.local_tile(ids, (_BM, d), (m_block, 0))
        cK = cute.local_tile(ids, (_BN, d), (None, 0))

        smem = cutlass.utils.SmemAllocator()
        q_layout = cute.tile_to_shape(s_layout, (_BM, d), (0, 1))
        kv_layout = cute.tile_to_shape(s_layout, (_BN, d), (0, 1))
        sQ = smem.allocate_tensor(dtype, q_layout, byte_alignment=128)
        sK = smem.allocate_tensor(dtype, kv_layout, byte_alignment=128)
        sV = smem.allocate_tensor(dtype, kv_layout, byte_alignment=128)
        # V^T (d x BN) over the same memory, the B operand of P V
        sVt = cute.composition(sV, cute.make_layout((d, _BN), stride=(_BN, 1)))

        n_tiles = cute.ceil_div(seq, _BN)
        n_clear = seq // _BN  # tiles wholly inside the sequence
        if cutlass.const_expr(causal):
            n_tiles = cute.ceil_div(cutlass.min((m_block + 1) * _BM, seq), _BN)  # up to the diagonal
            n_clear = cutlass.min(n_clear, (m_block * _BM) // _BN)  # wholly left of it

        thr_g2s = g2s.get_slice(tidx)
        tKcK = thr_g2s.partition_S(cK)
        load_rows(g2s, thr_g2s.partition_S(gQ), thr_g2s.partition_D(sQ), thr_g2s.partition_S(cQ), seq)
        load_rows(g2s, thr_g2s.partition_S(gK[None, None, 0]), thr_g2s.partition_D(sK), tKcK[None, None, None, 0],
                  seq)
        cute.arch.cp_async_commit_group()

        thr_mma = tiled_mma.get_slice(tidx)
        tSrQ = thr_mma.make_fragment_A(thr_mma.partition_A(sQ))
        tSrK = thr_mma.make_fragment_B(thr_mma.partition_B(sK))
        tOrVt = thr_mma.make_fragment_B(thr_mma.partition_B(sVt))
        s2r_q = cute.make_tiled_copy_A(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(False, 4), dtype), tiled_mma)
        s2r_k = cute.make_tiled_copy_B(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(False, 4), dtype), tiled_mma)
        s2r_v = cute.make_tiled_copy_B(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(True, 4), dtype), tiled_mma)
        thr_q, thr_k, thr_v = s2r_q.get_slice(tidx), s2r_k.get_slice(tidx), s2r_v.get_slice(tidx)
        tSsQ, tSrQ_view = thr_q.partition_S(sQ), thr_q.retile(tSrQ)
        tSsK, tSrK_view = thr_k.partition_S(sK), thr_k.retile(tSrK)
        tOsVt, tOrVt_view = thr_v.partition_S(sVt), thr_v.retile(tOrVt)
        tScS = thr_mma.partition_C(cute.make_identity_tensor((_BM, _BN)))  # tile-local (row, key) of the scores

        acc_o = cute.make_rmem_tensor(thr_mma.partition_shape_C((_BM, d)), cutlass.Float32)
        acc_o.fill(0.0)
        rows = 2 * cute.size(acc_o, mode=[1])
        row_max = cute.make_rmem_tensor(rows, cutlass.Float32)
        row_sum = cute.make_rmem_tensor(rows, cutlass.Float32)
        row_max.fill(-cutlass.Float32.inf)
        row_sum.fill(0.0)

        cute.arch.cp_async_wait_group(0)
        cute.arch.barrier()
        cute.copy(s2r_q, tSsQ, tSrQ_view)  # Q stays in registers for the whole loop

        args = (scale_log2, tiled_mma, g2s, gK, gV, sK, sV, tKcK, tSrQ, tSrK, s2r_k, tSsK, tSrK_view, tOrVt, s2r_v,
                tOsVt, tOrVt_view, tScS, acc_o, row_max, row_sum)
        for n in cutlass.range(0, n_clear, 1, unroll=1):
            attend(n, n_tiles, m_block, seq, *args, False, causal)
        for n in cutlass.range(n_clear, n_tiles, 1, unroll=1):
            attend(n, n_tiles, m_block, seq, *args, True, causal)

        # O = acc / l, stored from the accumulators; rows past the sequence's end are not stored
        tOgO = thr_mma.partition_C(gO)
        tOcO = thr_mma.partition_C(cQ)
        for m in cutlass.range_constexpr(cute.size(acc_o, mode=[1])):
            for half in cutlass.range_constexpr(2):
                total = quad_reduce(row_sum[half + 2 * m], lambda a, b: a + b)
                inverse = cute.arch.rcp_approx(total)
                if cute.elem_less(tOcO[(0, half), m, 0][0], seq):
                    for j in cutlass.range_constexpr(cute.size(acc_o, mode=[2])):
                        for pair in cutlass.range_constexpr(2):
                            tOgO[(pair, half), m, j] = (acc_o[(pair, half), m, j] * inverse).to(dtype)

    @cute.jit
    def attention(mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mO: cute.Tensor,
                  scale_log2: cutlass.Constexpr, causal: cutlass.Constexpr, stream):
        dtype, d = mQ.element_type, mQ.shape[3]
        # the shared tiles: 8-row atoms 64 (or 32) columns wide, XOR-swizzled so that ldmatrix's 8 rows of 16
        # bytes fall in distinct banks
        width = 64 if d % 64 == 0 else 32
        s_layout = cute.make_composed_layout(cute.make_swizzle(3 if width == 64 else 2, 3, 3), 0,
                                             cute.make_layout((8, width), stride=(width, 1)))
        per_copy = 128 // dtype.width  # 16 bytes a cp.async
        lanes = width // per_copy
        g2s = cute.make_tiled_copy_tv(
            cute.make_copy_atom(cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL), dtype,
                                num_bits_per_copy=128),
            cute.make_layout((_THREADS // lanes, lanes), stride=(lanes, 1)), cute.make_layout((1, per_copy)))
        # 4 warps down M; N and K tiled by 16 so that one ldmatrix.x4 feeds two 8-wide B atoms
        tiled_mma = cute.make_tiled_mma(warp.MmaF16BF16Op(dtype, cutlass.Float32, (16, 8, 16)), (_WARPS, 1, 1),
                                        permutation_mnk=(_WARPS * 16, 16, 16))
        grid = [cute.ceil_div(mQ.shape[2], _BM), mQ.shape[1], mQ.shape[0]]
        attention_kernel(mQ, mK, mV, mO, scale_log2, causal, s_layout, g2s, tiled_mma).launch(
            grid=grid, block=[_THREADS, 1, 1], stream=stream)

    return attention


def _check(workload, dtype, device) -> None:
    nvidia.require(device, "CuTe DSL")
    if dtype == "float32":
        raise Unsupported("this CuTe DSL flash attention's mma.sync atom takes 16-bit inputs (fp16, bf16); over fp32 "
                          "the tensor cores would run in tf32")
    if workload["head_dim"] not in _HEAD_DIMS:
        raise Unsupported(f"head_dim {workload['head_dim']}: this CuTe DSL flash attention covers {_HEAD_DIMS} (its "
                          "swizzled shared-memory tiles are 32 or 64 columns wide; 128 fp32 accumulator columns a row "
                          "is its register budget)")


def _signature(workload, dtype) -> tuple:
    from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

    shape = (workload["batch"], workload["heads"], workload["seq"], workload["head_dim"])
    dt = cute_dsl.dtype(dtype)
    q, k, v, o = (make_fake_compact_tensor(dt, shape, stride_order=(3, 2, 1, 0), assumed_align=16) for _ in range(4))
    scale_log2 = spec.softmax_scale(workload["head_dim"]) * _LOG2E
    return q, k, v, o, scale_log2, workload["causal"], make_fake_stream(use_tvm_ffi_env_stream=True)


def _config(workload) -> dict:
    return {"BLOCK_M": _BM, "BLOCK_N": _BN, "threads": _THREADS, "HEAD_DIM": workload["head_dim"],
            "CAUSAL": workload["causal"], "mma": "mma.sync 16x8x16, 4 warps; cp.async + ldmatrix"}


def build(workload, dtype, device, variant):
    import cutlass.cute as cute

    _check(workload, dtype, device)
    compiled = cute.compile(_kernel(), *_signature(workload, dtype), options="--enable-tvm-ffi")
    return Built(lambda q, k, v, out: compiled(q, k, v, out), _config(workload))


def compile_for(workload, dtype, device, variant):
    _check(workload, dtype, device)
    return cute_dsl.compile_for(_kernel(), _signature(workload, dtype), device, _config(workload), "CuTe DSL",
                                options="--enable-tvm-ffi")
