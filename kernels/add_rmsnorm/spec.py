"""add_rmsnorm: the residual add fused with the RMSNorm that follows it, as in a Llama decoder layer
(`hidden = residual + hidden; residual = hidden; hidden = post_attention_layernorm(hidden)`):

    h = x + residual,   y = h / sqrt(mean(h^2 over the hidden dim) + eps) * w

x and residual are (tokens, hidden), w is (hidden,). Both h (the new residual stream) and y are outputs, as
fused add + RMSNorm kernels produce them. One output tensor (the worker checks and poisons one tensor per job):
`out` is (2, tokens, hidden) with out[0] = y and out[1] = h; an implementation writes each straight into its half.

Memory-bound: x, residual and w read once, y and h written once; a few operations per element. Judged in GB/s
(`min_bytes`). Eager PyTorch runs the add, then the norm, which reads h back.
No framework import at module level: the planner reads WORKLOADS without torch.
"""
from opmatrix.kit import ITEMSIZE, UNIT_ROUNDOFF

EPS = 1e-6  # rmsnorm's convention (kernels/rmsnorm/spec.py); every implementation reads it through load_spec

WORKLOADS = {
    # GPU-sized. The model profile's Llama (opmatrix.profile.targets, preset gpu: hidden 2048, batch 4 x sequence
    # 2048): a prefill step (134 MB in bf16) and a decode step (4 tokens: 69 KB, launch-bound).
    "llama_prefill": {"tokens": 8192, "hidden": 2048},
    "llama_decode": {"tokens": 4, "hidden": 2048},
    # Llama-3-8B-like: hidden 4096, the same 8192 tokens (268 MB in bf16)
    "llama8b_prefill": {"tokens": 8192, "hidden": 4096},
    # CPU-sized: a few hundred elements per row; the ragged one has no size a power of 2
    "small_512": {"tokens": 128, "hidden": 512},
    "ragged_700": {"tokens": 67, "hidden": 700},
}

# Relative error of the whole output against the fp64 reference: output rounding dominates.
TOLERANCE = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-5}
DTYPES = tuple(TOLERANCE)  # the dtypes this kernel is defined for: a matrix may name only these

# The inputs the judge draws (opmatrix.incell.contents), each call one kind, in secret. As in kernels/rmsnorm: an LLM's
# residual stream carries a few hidden channels ~1e4 x the rest in every token (LLM.int8()'s outlier features; the
# "massive activations" of Sun et al. 2024 live in the residual stream), and the sublayer output added to it does not.
# `outliers`: the residual's _OUTLIER_CHANNELS channels, chosen by the seed, of magnitude _OUTLIER x [0.5, 1.5) and one
# sign each; x and the rest N(0, 1). h (an output) stays within fp16 (|h| < 1.5e4 + |x|), every row's rms is the
# outliers', so a kernel that clamps its inputs or sums squares in fp16 (1e8 > 65504) is wrong; rounding h to fp16
# (spacing 8 at 1e4) moves the rms by at most u, which the 3 u of elementwise_tolerance already allows for.
INPUT_KINDS = ("normal", "outliers")
_OUTLIER, _OUTLIER_CHANNELS = 1e4, 4


def describe(w: dict) -> str:
    return f"tokens={w['tokens']} hidden={w['hidden']}"


def flops(w: dict) -> float:
    """The add, then square, sum, scale by the row's factor and by w: about 5 operations per element."""
    return 5.0 * w["tokens"] * w["hidden"]


def min_bytes(w: dict, dtype: str) -> float:
    """x, residual and w read once; y and h written once."""
    return float(ITEMSIZE[dtype] * (4 * w["tokens"] * w["hidden"] + w["hidden"]))


def tolerance(dtype: str) -> float:
    return TOLERANCE[dtype]


def elementwise_tolerance(dtype: str) -> tuple[float, float] | None:
    """(atol in units of the row's rms, rtol). y may be rounded three times: the model's eager code rounds h to
    the dtype (it is an output), normalises that, rounds the normalised row to the dtype and rounds its product
    with w again (LlamaRMSNorm): up to 3 u relative (u = 2^-11 fp16, 2^-8 bf16), one u more than the default's
    2 u. Eager PyTorch on the CPU (torch 2.13, the llama8b_prefill shape, 3 seeds) needed up to 2.4 u at atol 0.5 u:
    rtol 3 u, atol the default 0.5 u. fp32 rounds nothing to a narrower type: the default (None)."""
    u = None if dtype == "float32" else UNIT_ROUNDOFF[dtype]
    return (0.5 * u, 3 * u) if u else None


def make_inputs(w: dict, dtype: str, device: str, seed: int) -> tuple:
    """Seeded x, residual ~ N(0, 1) and w ~ 1 + N(0, 0.1): never zeros, never all ones; the residual with outlier
    channels where w["inputs"] is "outliers" (INPUT_KINDS)."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    dt = getattr(torch, dtype)
    shape = (w["tokens"], w["hidden"])
    x = torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dt)
    residual = torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
    weight = (1 + 0.1 * torch.randn(w["hidden"], generator=gen, device=device, dtype=torch.float32)).to(dt)
    if w.get("inputs", "normal") == "outliers":
        channels = torch.randperm(w["hidden"], generator=gen, device=device)[:_OUTLIER_CHANNELS]
        sign = torch.randint(0, 2, (len(channels),), generator=gen, device=device) * 2.0 - 1.0
        magnitude = _OUTLIER * (0.5 + torch.rand(w["tokens"], len(channels), generator=gen, device=device))
        residual[:, channels] = sign * magnitude
    return x, residual.to(dt), weight


def make_output(w: dict, dtype: str, device: str):
    import torch

    return torch.empty(2, w["tokens"], w["hidden"], device=device, dtype=getattr(torch, dtype))


def reference(inputs: tuple, w: dict):
    """float64: y and h, stacked (out[0] = y, out[1] = h)."""
    import torch

    x, residual, weight = (t.double() for t in inputs)
    h = x + residual
    return torch.stack((h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight, h))
