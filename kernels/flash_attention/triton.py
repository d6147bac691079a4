"""Triton fused attention forward (the online-softmax technique of Triton's fused-attention tutorial, written
here): each program owns BLOCK_M query rows of one (batch, head), streams K and V in BLOCK_N tiles, keeps a
running max and sum in fp32 and never writes the scores. Masks handle any sequence length; head_dim must be a
power of two.

Issue 14 (strong contestants) changed the kernel to the tutorial's structure:
- exp2 with log2(e) folded into the scale; the P V product accumulates into `acc` inside tl.dot (one MMA chain,
  no separate add), after `acc` is rescaled by alpha;
- causal in two stages: the blocks left of the query block's diagonal run without any mask, then only the
  diagonal block(s) apply the causal mask (fully masked blocks are never visited); BLOCK_M is a multiple of
  BLOCK_N so the two stages meet at a block boundary;
- EVEN (sequence a multiple of both blocks, every H200 workload): no bounds masks on any load or store.
Not used: warp specialisation (`tl.range(..., warp_specialize=True)`); Triton's tutorial turns it on for
Blackwell only, and TMA tensor descriptors (they need a device-side allocator hook; pointer loads still lower to
cp.async pipelines and wgmma on Hopper).

Variants: `default` (_GPU_CONFIG: 128x64 blocks, 8 warps, 3 stages, the tutorial's Hopper choice for head_dim
128); `tuned` (GPU only): triton.autotune on the device, keyed on (seq, head_dim, causal), over _TUNE_CONFIGS:
BLOCK_M 64/128 x BLOCK_N 32/64/128 (BLOCK_N <= BLOCK_M), 4 warps for 64 rows and 8 for 128, 2-4 stages: the
block sizes trade MMA size and K/V reuse against registers (128x128 with fp32 acc is near the 255-register
limit) and shared memory (3 stages of 128x128 K and V tiles is 192 KB plus Q), the stages the load latency.
Configurations that do not fit are pruned by the autotuner at run time.
Verified here: the interpreter (TRITON_INTERPRET=1) matches the fp64 reference on small causal and
non-causal, even and ragged shapes (tests/cells/test_kernels_*); triton_compile_for builds sm_90 cubins for all
four H200 workloads whose PTX has wgmma. On the H200, against cuDNN and SDPA's FA2 backend:
reports/20261130-h200-strong-flash/NOTES.md (docs/results.md).
"""
import triton
import triton.language as tl

from opmatrix.kit import Built, Unsupported, load_spec

spec = load_spec(__file__)
VARIANTS = ("default", "tuned")


@triton.jit
def _attend(acc, l_i, m_i, q, k_ptr, v_ptr, offs_m, offs_n, offs_d, lo, hi, seq, qk_scale, stride_s,
            BLOCK_N: tl.constexpr, DIAGONAL: tl.constexpr, EVEN: tl.constexpr):
    """The online-softmax update over key blocks [lo, hi); the causal mask only where DIAGONAL."""
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        if EVEN:
            k = tl.load(k_ptr + cols[None, :] * stride_s + offs_d[:, None])
            v = tl.load(v_ptr + cols[:, None] * stride_s + offs_d[None, :])
        else:
            k = tl.load(k_ptr + cols[None, :] * stride_s + offs_d[:, None], mask=cols[None, :] < seq, other=0.0)
            v = tl.load(v_ptr + cols[:, None] * stride_s + offs_d[None, :], mask=cols[:, None] < seq, other=0.0)
        qk = tl.dot(q, k)
        if DIAGONAL:
            qk = tl.where(offs_m[:, None] >= cols[None, :], qk, float("-inf"))
        if not EVEN:
            qk = tl.where(cols[None, :] < seq, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq, scale, stride_h, stride_s, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, EVEN: tl.constexpr):
    start_m = tl.program_id(0)
    base = tl.program_id(1) * stride_h  # batch * heads + head
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = q_ptr + base + offs_m[:, None] * stride_s + offs_d[None, :]
    q = tl.load(q_ptrs) if EVEN else tl.load(q_ptrs, mask=offs_m[:, None] < seq, other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    qk_scale = scale * 1.4426950408889634  # exp(x) = exp2(x * log2(e))
    k_base, v_base = k_ptr + base, v_ptr + base
    if CAUSAL:
        diagonal = start_m * BLOCK_M  # every key block before it is wholly visible: no mask
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_base, v_base, offs_m, offs_n, offs_d, 0, diagonal, seq,
                                qk_scale, stride_s, BLOCK_N, False, True)
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_base, v_base, offs_m, offs_n, offs_d, diagonal,
                                tl.minimum(diagonal + BLOCK_M, seq), seq, qk_scale, stride_s, BLOCK_N, True, EVEN)
    else:
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_base, v_base, offs_m, offs_n, offs_d, 0, seq, seq, qk_scale,
                                stride_s, BLOCK_N, False, EVEN)
    out = (acc / l_i[:, None]).to(o_ptr.dtype.element_ty)
    o_ptrs = o_ptr + base + offs_m[:, None] * stride_s + offs_d[None, :]
    if EVEN:
        tl.store(o_ptrs, out)
    else:
        tl.store(o_ptrs, out, mask=offs_m[:, None] < seq)


_GPU_CONFIG = {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3}
_INTERPRETER_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 16}
_TUNE_CONFIGS = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=4 if bm == 64 else 8, num_stages=st)
                 for bm in (64, 128) for bn in (32, 64, 128) if bn <= bm for st in (2, 3, 4)]
_tuned_kernel = triton.autotune(configs=_TUNE_CONFIGS, key=["seq", "HEAD_DIM", "CAUSAL"])(_attention_kernel)


def _even(seq, block_m, block_n):
    return seq % block_m == 0 and seq % block_n == 0


def build(workload, dtype, device, variant):
    seq, head_dim, scale = workload["seq"], workload["head_dim"], spec.softmax_scale(workload["head_dim"])
    heads, causal = workload["batch"] * workload["heads"], workload["causal"]
    if variant == "tuned":
        if not device.is_gpu:
            raise Unsupported("'tuned' times candidate configurations on a GPU; the interpreter runs 'default'")
        even = seq % 128 == 0  # every candidate block divides a multiple of 128

        def attention(q, k, v, out):
            grid = lambda meta: (triton.cdiv(seq, meta["BLOCK_M"]), heads)  # noqa: E731
            _tuned_kernel[grid](q, k, v, out, seq, scale, q.stride(1), q.stride(2), HEAD_DIM=head_dim,
                                CAUSAL=causal, EVEN=even)

        return Built(attention, {"autotune": f"{len(_TUNE_CONFIGS)} configs, key (seq, head_dim, causal)"})
    cfg = dict(_GPU_CONFIG if device.is_gpu else _INTERPRETER_CONFIG)
    even = _even(seq, cfg["BLOCK_M"], cfg["BLOCK_N"])
    grid = (triton.cdiv(seq, cfg["BLOCK_M"]), heads)

    def attention(q, k, v, out):
        _attention_kernel[grid](q, k, v, out, seq, scale, q.stride(1), q.stride(2), HEAD_DIM=head_dim,
                                CAUSAL=causal, EVEN=even, **cfg)

    return Built(attention, dict(cfg, EVEN=even))


def compile_for(workload, dtype, device, variant):
    """No host has the device: compile ahead of time for it (CUDA cubin or AMD hsaco); 'tuned' at the default
    configuration (there is no device to time candidates on)."""
    from opmatrix.kit import aot

    options = {"num_warps": _GPU_CONFIG["num_warps"], "num_stages": _GPU_CONFIG["num_stages"]}
    constexprs = {"BLOCK_M": _GPU_CONFIG["BLOCK_M"], "BLOCK_N": _GPU_CONFIG["BLOCK_N"],
                  "HEAD_DIM": workload["head_dim"], "CAUSAL": workload["causal"],
                  "EVEN": _even(workload["seq"], _GPU_CONFIG["BLOCK_M"], _GPU_CONFIG["BLOCK_N"])}
    return aot.triton_compile_for(_attention_kernel, dtype, constexprs, options, device)
