"""Gluon flash attention forward: the online-softmax algorithm of kernels/flash_attention/triton.py with every layout
written out. One program per BLOCK_M query rows of one (batch, head) streams K and V in BLOCK_N tiles; Q K^T and
P V go to the tensor cores with fp32 accumulators in an MMA layout, the running max and sum are fp32 vectors in the
slice of that layout, and the scores never leave registers.

- exp2 with log2(e) folded into the scale, the max kept in scaled units (as triton.py);
- causal in two stages: key blocks left of the query block's diagonal without a mask, then the diagonal blocks
  with it; blocks wholly right of the diagonal are never visited;
- EVEN (the sequence a multiple of both blocks): no bounds masks; otherwise loads are masked and keys past the
  end get -inf, so any sequence length is covered.

Variants (the tensor-core instruction):
- `default`: warp-level mma.sync (gluon.language.nvidia.ampere.mma_v2) on sm_90 and sm_100 alike; K and V go from
  global memory to registers and to the operand layouts by convert_layout;
- `wgmma` (sm_90 only): Hopper's warpgroup MMA (hopper.warpgroup_mma), Q, K and V staged in NVMMA-swizzled shared
  memory, P from registers; synchronous (no mbarrier pipeline, no TMA, no warp specialisation).
Neither uses Blackwell's tcgen05 / tensor memory, and neither overlaps loads with MMAs as FA3/FA4 do: a first rung.
16-bit inputs only (fp32 on the tensor cores would be tf32), head_dim a power of two from 16 to 128, NVIDIA only,
no CPU mode (Gluon has no interpreter). Compiled here for sm_90 / sm_100, never run: unchecked against fp64 until a
GPU run.
"""
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import mma_v2
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, warpgroup_mma

# a CTA-wide barrier: gl.barrier since Triton 3.9, gl.thread_barrier before (3.6: the H200 image's Triton)
_barrier = gl.barrier if hasattr(gl, "barrier") else gl.thread_barrier

from opmatrix.kit import Built, Unsupported, aot, load_spec

spec = load_spec(__file__)

VARIANTS = ("default", "wgmma")
# BLOCK_N: mma.sync's B operand (K^T, V) is held whole by every warp: 32 keys keep head_dim 128 at 227 registers
# without spills (64 spilled); wgmma reads B from shared memory, so 64 keys fit in 190
_CONFIG = {"default": {"BLOCK_M": 128, "BLOCK_N": 32, "WARPS": 8}, "wgmma": {"BLOCK_M": 128, "BLOCK_N": 64, "WARPS": 8}}
_HEAD_DIMS = (16, 32, 64, 128)  # mma.sync's K step is 16; 128 rows x 128 columns of fp32 acc is 64 registers a thread


@gluon.jit
def _attend(acc, l_i, m_i, q, k_ptr, v_ptr, rows, lo, hi, seq, qk_scale, stride_s, BLOCK_M: gl.constexpr,
            BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, WARPS: gl.constexpr, DIAGONAL: gl.constexpr,
            EVEN: gl.constexpr):
    """The online-softmax update over key blocks [lo, hi); the causal mask only where DIAGONAL."""
    blocked: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [WARPS, 1], [1, 0])  # 16-byte loads along head_dim
    k_blocked: gl.constexpr = gl.BlockedLayout([8, 1], [8, 4], [1, WARPS], [0, 1])  # K^T: contiguous down a column
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, 8])
    b_operand: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=mma, k_width=2)
    p_operand: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
    kt_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(1, k_blocked))
    kt_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, k_blocked))
    v_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, blocked))
    v_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, blocked))
    score_cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mma))
    for start in range(lo, hi, BLOCK_N):
        kt_ptrs = k_ptr + (start + kt_n)[None, :] * stride_s + kt_d[:, None]  # K^T tile, HEAD_DIM x BLOCK_N
        v_ptrs = v_ptr + (start + v_n)[:, None] * stride_s + v_d[None, :]
        if EVEN:
            kt = gl.load(kt_ptrs)
            v = gl.load(v_ptrs)
        else:
            kt = gl.load(kt_ptrs, mask=(start + kt_n)[None, :] < seq, other=0.0)
            v = gl.load(v_ptrs, mask=(start + v_n)[:, None] < seq, other=0.0)
        qk = mma_v2(q, gl.convert_layout(kt, b_operand), gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma))
        cols = start + score_cols
        if DIAGONAL:
            qk = gl.where(rows[:, None] >= cols[None, :], qk, float("-inf"))
        if not EVEN:
            qk = gl.where(cols[None, :] < seq, qk, float("-inf"))
        m_new = gl.maximum(m_i, gl.max(qk, 1) * qk_scale)
        p = gl.exp2(qk * qk_scale - m_new[:, None])
        alpha = gl.exp2(m_i - m_new)
        l_i = l_i * alpha + gl.sum(p, 1)
        acc = mma_v2(gl.convert_layout(p.to(v.dtype), p_operand), gl.convert_layout(v, b_operand),
                     acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@gluon.jit
def _attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq, scale, stride_h, stride_s, BLOCK_M: gl.constexpr,
                      BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, WARPS: gl.constexpr, CAUSAL: gl.constexpr,
                      EVEN: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [WARPS, 1], [1, 0])
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, 8])
    start_m = gl.program_id(0)
    base = gl.program_id(1).to(gl.int64) * stride_h  # batch * heads + head
    q_rows = start_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, blocked))
    dims = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, blocked))
    q_ptrs = q_ptr + base + q_rows[:, None] * stride_s + dims[None, :]
    q = gl.load(q_ptrs) if EVEN else gl.load(q_ptrs, mask=q_rows[:, None] < seq, other=0.0)
    q = gl.convert_layout(q, gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2))
    rows = start_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, mma))
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, layout=gl.SliceLayout(1, mma))
    l_i = gl.zeros([BLOCK_M], gl.float32, layout=gl.SliceLayout(1, mma))
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, layout=mma)
    qk_scale = scale * 1.4426950408889634  # exp(x) = exp2(x * log2(e))
    k_base, v_base = k_ptr + base, v_ptr + base
    if CAUSAL:
        diagonal = start_m * BLOCK_M  # every key block before it is wholly visible: no mask
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_base, v_base, rows, 0, diagonal, seq, qk_scale, stride_s,
                                BLOCK_M, BLOCK_N, HEAD_DIM, WARPS, False, True)
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_base, v_base, rows, diagonal,
                                gl.minimum(diagonal + BLOCK_M, seq), seq, qk_scale, stride_s, BLOCK_M, BLOCK_N,
                                HEAD_DIM, WARPS, True, EVEN)
    else:
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_base, v_base, rows, 0, seq, seq, qk_scale, stride_s,
                                BLOCK_M, BLOCK_N, HEAD_DIM, WARPS, False, EVEN)
    out = gl.convert_layout((acc / l_i[:, None]).to(o_ptr.dtype.element_ty), blocked)
    o_ptrs = o_ptr + base + q_rows[:, None] * stride_s + dims[None, :]
    if EVEN:
        gl.store(o_ptrs, out)
    else:
        gl.store(o_ptrs, out, mask=q_rows[:, None] < seq)


@gluon.jit
def _attend_wgmma(acc, l_i, m_i, q_smem, k_smem, v_smem, k_ptr, v_ptr, rows, lo, hi, seq, qk_scale, stride_s,
                  BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, WARPS: gl.constexpr,
                  DIAGONAL: gl.constexpr, EVEN: gl.constexpr):
    """_attend with Hopper's warpgroup MMA: K and V staged through shared memory (the B operands), Q from shared
    memory, P from registers; synchronous wgmmas, a barrier before each tile overwrites the last."""
    blocked: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [WARPS, 1], [1, 0])
    s_mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1],
                                                    instr_shape=[16, BLOCK_N, 16])
    o_mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1],
                                                    instr_shape=[16, HEAD_DIM, 16])
    p_operand: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_mma, k_width=2)
    kv_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, blocked))
    kv_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, blocked))
    score_cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_mma))
    for start in range(lo, hi, BLOCK_N):
        offsets = (start + kv_n)[:, None] * stride_s + kv_d[None, :]
        if EVEN:
            k = gl.load(k_ptr + offsets)
            v = gl.load(v_ptr + offsets)
        else:
            k = gl.load(k_ptr + offsets, mask=(start + kv_n)[:, None] < seq, other=0.0)
            v = gl.load(v_ptr + offsets, mask=(start + kv_n)[:, None] < seq, other=0.0)
        _barrier()  # every warpgroup is done with the last tiles' wgmmas before they are overwritten
        k_smem.store(k)
        v_smem.store(v)
        fence_async_shared()  # the stores, made by threads, visible to wgmma's async proxy
        _barrier()
        qk = warpgroup_mma(q_smem, k_smem.permute((1, 0)), gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_mma))
        cols = start + score_cols
        if DIAGONAL:
            qk = gl.where(rows[:, None] >= cols[None, :], qk, float("-inf"))
        if not EVEN:
            qk = gl.where(cols[None, :] < seq, qk, float("-inf"))
        m_new = gl.maximum(m_i, gl.max(qk, 1) * qk_scale)
        p = gl.exp2(qk * qk_scale - m_new[:, None])
        alpha = gl.exp2(m_i - m_new)
        l_i = l_i * alpha + gl.sum(p, 1)
        alpha_o = gl.convert_layout(alpha, gl.SliceLayout(1, o_mma))
        acc = warpgroup_mma(gl.convert_layout(p.to(k.dtype), p_operand), v_smem, acc * alpha_o[:, None])
        m_i = m_new
    return acc, l_i, m_i


@gluon.jit
def _wgmma_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq, scale, stride_h, stride_s, BLOCK_M: gl.constexpr,
                  BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, WARPS: gl.constexpr, CAUSAL: gl.constexpr,
                  EVEN: gl.constexpr):
    """_attention_kernel for the `wgmma` variant: the same algorithm and masks, the MMA layouts of version 3."""
    blocked: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [WARPS, 1], [1, 0])
    s_mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1],
                                                    instr_shape=[16, BLOCK_N, 16])
    o_mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1],
                                                    instr_shape=[16, HEAD_DIM, 16])
    dtype: gl.constexpr = q_ptr.dtype.element_ty
    start_m = gl.program_id(0)
    base = gl.program_id(1).to(gl.int64) * stride_h
    q_rows = start_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, blocked))
    dims = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, blocked))
    q_ptrs = q_ptr + base + q_rows[:, None] * stride_s + dims[None, :]
    q = gl.load(q_ptrs) if EVEN else gl.load(q_ptrs, mask=q_rows[:, None] < seq, other=0.0)
    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM],
                                       gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype), q)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    k_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], kv_layout)
    v_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], kv_layout)
    rows = start_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_mma))
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, layout=gl.SliceLayout(1, s_mma))
    l_i = gl.zeros([BLOCK_M], gl.float32, layout=gl.SliceLayout(1, s_mma))
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, layout=o_mma)
    qk_scale = scale * 1.4426950408889634
    k_base, v_base = k_ptr + base, v_ptr + base
    if CAUSAL:
        diagonal = start_m * BLOCK_M
        acc, l_i, m_i = _attend_wgmma(acc, l_i, m_i, q_smem, k_smem, v_smem, k_base, v_base, rows, 0, diagonal, seq,
                                      qk_scale, stride_s, BLOCK_M, BLOCK_N, HEAD_DIM, WARPS, False, True)
        acc, l_i, m_i = _attend_wgmma(acc, l_i, m_i, q_smem, k_smem, v_smem, k_base, v_base, rows, diagonal,
                                      gl.minimum(diagonal + BLOCK_M, seq), seq, qk_scale, stride_s, BLOCK_M, BLOCK_N,
                                      HEAD_DIM, WARPS, True, EVEN)
    else:
        acc, l_i, m_i = _attend_wgmma(acc, l_i, m_i, q_smem, k_smem, v_smem, k_base, v_base, rows, 0, seq, seq,
                                      qk_scale, stride_s, BLOCK_M, BLOCK_N, HEAD_DIM, WARPS, False, EVEN)
    l_o = gl.convert_layout(l_i, gl.SliceLayout(1, o_mma))
    out = gl.convert_layout((acc / l_o[:, None]).to(o_ptr.dtype.element_ty), blocked)
    o_ptrs = o_ptr + base + q_rows[:, None] * stride_s + dims[None, :]
    if EVEN:
        gl.store(o_ptrs, out)
    else:
        gl.store(o_ptrs, out, mask=q_rows[:, None] < seq)


def _check(workload, dtype, device, variant) -> None:
    if device.vendor != "nvidia":
        raise Unsupported("this Gluon kernel issues NVIDIA's tensor-core instructions (mma.sync, wgmma); an AMD GPU "
                          "needs one written for its MFMA layouts")
    if variant == "wgmma" and device.arch != "sm_90":
        raise Unsupported(f"`wgmma` is Hopper's warpgroup MMA (sm_90 only); {device.arch} has none (Blackwell's "
                          "tcgen05 and tensor memory are not written here): `default` (mma.sync) builds there")
    if dtype == "float32":
        raise Unsupported("this Gluon kernel's tensor cores take 16-bit inputs; over fp32 they would run in tf32")
    if workload["head_dim"] not in _HEAD_DIMS:
        raise Unsupported(f"head_dim {workload['head_dim']}: this Gluon kernel covers {_HEAD_DIMS} (a power of two "
                          "for its layouts, at most 128 for its registers)")


def _constexprs(workload, variant) -> dict:
    config, seq = _CONFIG[variant], workload["seq"]
    even = seq % config["BLOCK_M"] == 0 and seq % config["BLOCK_N"] == 0
    return dict(config, HEAD_DIM=workload["head_dim"], CAUSAL=workload["causal"], EVEN=even)


_KERNEL = {"default": _attention_kernel, "wgmma": _wgmma_kernel}


def build(workload, dtype, device, variant):
    _check(workload, dtype, device, variant)
    constexprs, seq, kernel = _constexprs(workload, variant), workload["seq"], _KERNEL[variant]
    scale = spec.softmax_scale(workload["head_dim"])
    grid = (triton.cdiv(seq, constexprs["BLOCK_M"]), workload["batch"] * workload["heads"])

    def attention(q, k, v, out):
        kernel[grid](q, k, v, out, seq, scale, q.stride(1), q.stride(2), **constexprs, num_warps=constexprs["WARPS"])

    return Built(attention, constexprs)


def compile_for(workload, dtype, device, variant):
    _check(workload, dtype, device, variant)
    constexprs = _constexprs(workload, variant)
    return aot.triton_compile_for(_KERNEL[variant], dtype, constexprs, {"num_warps": constexprs["WARPS"]}, device)
