"""Triton fused attention forward (the online-softmax technique of Triton's tutorial, written here): each
program owns BLOCK_M query rows of one (batch, head), streams K and V in BLOCK_N tiles, keeps a running max and
sum in fp32 and never writes the scores. Causal programs stop at their diagonal. Masks handle any sequence
length; head_dim must be a power of two."""
import torch
import triton
import triton.language as tl

from opmatrix.kit import Built, load_spec

spec = load_spec(__file__)


@triton.jit
def _attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq, scale, stride_h, stride_s, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    head = tl.program_id(1)  # batch * heads + head
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    base = head * stride_h
    q = tl.load(q_ptr + base + offs_m[:, None] * stride_s + offs_d[None, :], mask=offs_m[:, None] < seq, other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    qk_scale = scale * 1.4426950408889634  # exp(x) = exp2(x * log2(e))
    end = tl.minimum((start_m + 1) * BLOCK_M, seq) if CAUSAL else seq
    for start_n in range(0, end, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_ptr + base + cols[None, :] * stride_s + offs_d[:, None], mask=cols[None, :] < seq, other=0.0)
        s = tl.dot(q, k) * qk_scale
        keep = cols[None, :] < seq
        if CAUSAL:
            keep = keep & (offs_m[:, None] >= cols[None, :])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + base + cols[:, None] * stride_s + offs_d[None, :], mask=cols[:, None] < seq, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(o_ptr + base + offs_m[:, None] * stride_s + offs_d[None, :], acc.to(o_ptr.dtype.element_ty),
             mask=offs_m[:, None] < seq)


_GPU_CONFIG = {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3}
_INTERPRETER_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 32}


def build(workload, dtype, device, variant):
    cfg = dict(_GPU_CONFIG if device.is_gpu else _INTERPRETER_CONFIG)
    seq, head_dim, scale = workload["seq"], workload["head_dim"], spec.softmax_scale(workload["head_dim"])
    grid = (triton.cdiv(seq, cfg["BLOCK_M"]), workload["batch"] * workload["heads"])

    def attention(q, k, v, out):
        _attention_kernel[grid](q, k, v, out, seq, scale, q.stride(1), q.stride(2), HEAD_DIM=head_dim,
                                CAUSAL=workload["causal"], **cfg)

    return Built(attention, cfg)


def compile_for(workload, dtype, device, variant):
    """No host has the device: compile ahead of time for it (CUDA cubin or AMD hsaco)."""
    from opmatrix.kit import aot

    options = {"num_warps": _GPU_CONFIG["num_warps"], "num_stages": _GPU_CONFIG["num_stages"]}
    constexprs = {"BLOCK_M": _GPU_CONFIG["BLOCK_M"], "BLOCK_N": _GPU_CONFIG["BLOCK_N"],
                  "HEAD_DIM": workload["head_dim"], "CAUSAL": workload["causal"]}
    return aot.triton_compile_for(_attention_kernel, dtype, constexprs, options, device)
