"""rope: rotary position embedding applied to queries and keys, as transformers' Llama applies it
(`apply_rotary_pos_emb`):

    q_embed = q * cos + rotate_half(q) * sin,   k_embed = k * cos + rotate_half(k) * sin,
    rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2])

q is (batch, heads, seq, head_dim), k is (batch, kv_heads, seq, head_dim) (grouped-query attention: fewer kv
heads), cos and sin are (batch, seq, head_dim), broadcast over the heads. All contiguous, one dtype.

One output tensor (the worker checks and poisons one tensor per job): q_embed and k_embed concatenated along the
heads, `out` is (batch, heads + kv_heads, seq, head_dim) with out[:, :heads] = q_embed and out[:, heads:] =
k_embed. An implementation writes each straight into its slice of `out`; nothing is concatenated afterwards.

cos and sin are cos/sin of independent random angles over the whole head_dim: Llama's tables repeat their first
half in their second, and a kernel that read only one half would pass on those; here it fails, so every kernel
implements the general formula above (reading all of cos and sin, as the model's own code does).

Memory-bound: q, k, cos and sin read once, q_embed and k_embed written once; judged in GB/s (`min_bytes`).
No framework import at module level: the planner reads WORKLOADS without torch.
"""
from opmatrix.kit import ITEMSIZE, UNIT_ROUNDOFF

WORKLOADS = {
    # GPU-sized. The model profile's Llama (opmatrix.profile.targets, preset gpu: hidden 2048, 16 heads of 128,
    # as many kv heads, sequence 2048, batch 4): a prefill step (138 MB in bf16) and a decode step (batch 4, one
    # token each: 68 KB, launch-bound).
    "llama_prefill": {"batch": 4, "heads": 16, "kv_heads": 16, "seq": 2048, "head_dim": 128},
    "llama_decode": {"batch": 4, "heads": 16, "kv_heads": 16, "seq": 1, "head_dim": 128},
    # Llama-3-8B-like: 32 query heads sharing 8 kv heads (GQA), the same 8192 tokens (172 MB in bf16)
    "llama8b_prefill": {"batch": 4, "heads": 32, "kv_heads": 8, "seq": 2048, "head_dim": 128},
    # CPU-sized: a few hundred elements per (token, all heads); the ragged one has a head_dim that is not a power
    # of 2, an odd sequence and a single kv head.
    "small_d64": {"batch": 2, "heads": 4, "kv_heads": 2, "seq": 64, "head_dim": 64},
    "ragged_d96": {"batch": 1, "heads": 3, "kv_heads": 1, "seq": 37, "head_dim": 96},
}

# Relative error of the whole output against the fp64 reference: output rounding dominates.
TOLERANCE = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-5}
DTYPES = tuple(TOLERANCE)  # the dtypes this kernel is defined for: a matrix may name only these


def describe(w: dict) -> str:
    return (f"batch={w['batch']} heads={w['heads']} kv_heads={w['kv_heads']} seq={w['seq']} "
            f"head_dim={w['head_dim']}")


def check_workload(w: dict) -> None:
    """A workload a matrix defines: rotate-half pairs the two halves of head_dim."""
    if w["head_dim"] % 2:
        raise ValueError(f"head_dim = {w['head_dim']}: rotate-half splits head_dim in two halves; it must be even")


def _qk_elements(w: dict) -> int:
    return w["batch"] * (w["heads"] + w["kv_heads"]) * w["seq"] * w["head_dim"]


def flops(w: dict) -> float:
    """Two multiplies and an add (the negation is free) per output element."""
    return 3.0 * _qk_elements(w)


def min_bytes(w: dict, dtype: str) -> float:
    """q and k read once, cos and sin read once (not once per head), q_embed and k_embed written once."""
    table = w["batch"] * w["seq"] * w["head_dim"]
    return float(ITEMSIZE[dtype] * (2 * _qk_elements(w) + 2 * table))


def tolerance(dtype: str) -> float:
    return TOLERANCE[dtype]


def elementwise_tolerance(dtype: str) -> tuple[float, float] | None:
    """(atol in units of the row's rms, rtol). The model's eager code rounds q * cos and rotate_half(q) * sin to
    the dtype before adding them: where the two terms nearly cancel, that error is not proportional to the
    element but to the terms, u (|q cos| + |rotate_half(q) sin|), up to several times the row's rms on randn
    data (a row is one head's head_dim). Eager PyTorch on the CPU (torch 2.13, the llama8b_prefill shape, 3 seeds;
    the GPU rounds the same products the same way) needed up to 3.8 u at rtol 2 u (u = 2^-11 fp16, 2^-8 bf16):
    atol 8 u keeps twice that. A kernel that adds in fp32 and rounds once needs far less (torch.compile on the CPU:
    under 1e-4 u). fp32 rounds nothing to a narrower type: the default (None)."""
    u = None if dtype == "float32" else UNIT_ROUNDOFF[dtype]
    return (8 * u, 2 * u) if u else None


def make_inputs(w: dict, dtype: str, device: str, seed: int) -> tuple:
    """Seeded q, k ~ N(0, 1); cos, sin of angles uniform in [0, 2 pi) drawn independently for every (batch,
    position, dim) (see the docstring: no half may stand in for the other)."""
    import math

    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    dt = getattr(torch, dtype)
    b, s, d = w["batch"], w["seq"], w["head_dim"]
    q = torch.randn(b, w["heads"], s, d, generator=gen, device=device, dtype=torch.float32).to(dt)
    k = torch.randn(b, w["kv_heads"], s, d, generator=gen, device=device, dtype=torch.float32).to(dt)
    angle = 2 * math.pi * torch.rand(b, s, d, generator=gen, device=device, dtype=torch.float32)
    return q, k, angle.cos().to(dt), angle.sin().to(dt)


def make_output(w: dict, dtype: str, device: str):
    import torch

    return torch.empty(w["batch"], w["heads"] + w["kv_heads"], w["seq"], w["head_dim"], device=device,
                       dtype=getattr(torch, dtype))


def reference(inputs: tuple, w: dict):
    """float64: q_embed and k_embed, concatenated along the heads."""
    import torch

    q, k, cos, sin = (t.double() for t in inputs)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    half = q.shape[-1] // 2

    def rotate_half(x):
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    return torch.cat((q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin), dim=1)
