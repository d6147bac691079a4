"""flash_attention (forward): O = softmax(Q K^T / sqrt(d) [+ causal mask]) V, tensors (batch, heads, seq, head_dim).

Compute-bound at long sequences; a fused kernel never writes the seq x seq score matrix to memory.
No framework import at module level: the planner reads WORKLOADS without torch.
"""
from opmatrix.kit import ITEMSIZE, UNIT_ROUNDOFF

WORKLOADS = {
    # GPU-sized (the seed's shapes), causal and not
    "b8_h32_s4096_d128": {"batch": 8, "heads": 32, "seq": 4096, "head_dim": 128, "causal": False},
    "b8_h32_s4096_d128_causal": {"batch": 8, "heads": 32, "seq": 4096, "head_dim": 128, "causal": True},
    "b1_h32_s8192_d128": {"batch": 1, "heads": 32, "seq": 8192, "head_dim": 128, "causal": False},
    "b1_h32_s8192_d128_causal": {"batch": 1, "heads": 32, "seq": 8192, "head_dim": 128, "causal": True},
    # CPU-sized; a sequence that is not a multiple of any block size
    "b1_h2_s128_d64": {"batch": 1, "heads": 2, "seq": 128, "head_dim": 64, "causal": False},
    "b1_h2_s127_d64_causal": {"batch": 1, "heads": 2, "seq": 127, "head_dim": 64, "causal": True},
}

TOLERANCE = {"float16": 3e-3, "bfloat16": 2e-2, "float32": 1e-4}
DTYPES = tuple(TOLERANCE)  # the dtypes this kernel is defined for: a matrix may name only these

# The inputs the judge draws (opmatrix.incell.contents), each call one kind, in secret. A trained LLM's attention
# logits are not N(0, 1): without QK normalisation they grow to tens and beyond (attention logit growth, Dehghani et
# al. 2023; the attention sinks of Xiao et al. 2023 draw nearly all of a row's weight), and the softmax is then nearly
# one-hot. `large_logits`: q and k x _LARGE_QK, so the logits q.k / sqrt(d) are N(0, _LARGE_QK^4) = N(0, 25^2): a row's
# largest is ~65 over 128 keys and ~85-90 over 4096-8192, past fp16's exp (exp(11) > 65504) everywhere and fp32's
# (exp(88.7)) in many long rows, so a kernel must subtract the row's running maximum, as flash attention does; q and k
# stay small numbers (|x| < ~25) in every dtype. No -inf masking: this operator takes no mask (causal masks inside the
# kernel).
INPUT_KINDS = ("normal", "large_logits")
_LARGE_QK = 5.0


def describe(w: dict) -> str:
    return (f"batch={w['batch']} heads={w['heads']} seq={w['seq']} head_dim={w['head_dim']}"
            + (" causal" if w["causal"] else ""))


def flops(w: dict) -> float:
    """Two matmuls of 2*seq*seq*head_dim per head; a causal mask halves the useful work."""
    total = 4.0 * w["batch"] * w["heads"] * w["seq"] ** 2 * w["head_dim"]
    return total / 2 if w["causal"] else total


def min_bytes(w: dict, dtype: str) -> float:
    size = ITEMSIZE[dtype]
    return float(4 * size * w["batch"] * w["heads"] * w["seq"] * w["head_dim"])  # Q, K, V read; O written


def tolerance(dtype: str) -> float:
    return TOLERANCE[dtype]


def elementwise_tolerance(dtype: str) -> tuple[float, float]:
    """(atol in units of the row's rms, rtol) for the element-wise check (opmatrix.incell.correctness). A fused
    kernel rounds the softmax probabilities P to the input dtype before P @ V (the tensor cores take fp16/bf16): an
    error not proportional to the output element. On an H200 (SDPA flash, cuDNN, efficient; Triton; every GPU
    workload above, 3 seeds) it needed up to 2.6 u at rtol 2 u (u = 2^-11 fp16, 2^-8 bf16): atol 5 u keeps twice
    that (large_logits: 0.39 of it on an H100). fp32 rounds nothing to a narrower type, but its error grows with the
    logits (an fp32 Q K^T is off by ~u32 x |q| |k|, and the softmax passes that on): on an H100 (torch 2.11, SDPA's
    math, efficient and default paths, the three GPU workloads above, 2 seeds) N(0, 1) inputs needed up to 1.1e-5 x
    rms_row at rtol 1e-5, large_logits 1.67e-4 (math; efficient 7.9e-5), past the default 5e-5: atol 3e-4 keeps 1.8x
    that, and an fp32 kernel off by ~1e-2 on N(0, 1) inputs (the Triton `tuned` variant on that H100) still fails."""
    if dtype == "float32":
        return (3e-4, 1e-5)
    u = UNIT_ROUNDOFF[dtype]
    return (5 * u, 2 * u)


def softmax_scale(head_dim: int) -> float:
    """The factor on Q K^T: every implementation and the reference use this one (SDPA's default is the same)."""
    return head_dim ** -0.5


def make_inputs(w: dict, dtype: str, device: str, seed: int) -> tuple:
    """Seeded q, k, v ~ N(0, 1); q and k x _LARGE_QK where w["inputs"] is "large_logits" (INPUT_KINDS)."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    shape = (w["batch"], w["heads"], w["seq"], w["head_dim"])
    scale = _LARGE_QK if w.get("inputs", "normal") == "large_logits" else 1.0
    return tuple((factor * torch.randn(shape, generator=gen, device=device, dtype=torch.float32)).to(
        getattr(torch, dtype)) for factor in (scale, scale, 1.0))


def make_output(w: dict, dtype: str, device: str):
    import torch

    return torch.empty(w["batch"], w["heads"], w["seq"], w["head_dim"], device=device, dtype=getattr(torch, dtype))


def reference(inputs: tuple, w: dict):
    """float64, one (batch, head) slice at a time so the seq x seq scores fit in memory at any size."""
    import torch

    q, k, v = inputs
    causal = w["causal"]
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)
    scale = softmax_scale(w["head_dim"])
    seq = q.shape[-2]
    mask = torch.ones(seq, seq, dtype=torch.bool, device=q.device).tril() if causal else None
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            scores = (q[b, h].double() @ k[b, h].double().T) * scale
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            out[b, h] = torch.softmax(scores, dim=-1) @ v[b, h].double()
    return out
