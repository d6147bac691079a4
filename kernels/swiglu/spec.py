"""swiglu: the gated activation of Llama's MLP, out = silu(gate) * up with silu(x) = x * sigmoid(x); gate and
up are (tokens, intermediate), the outputs of gate_proj and up_proj (transformers' LlamaMLP computes
`down_proj(act_fn(gate_proj(x)) * up_proj(x))`; this kernel is the part between the projections).

Memory-bound: gate and up read once, out written once, a handful of operations per element; judged in GB/s
(`min_bytes`). Eager PyTorch runs it as two kernels (silu, then the product) and writes the activation in between.
No framework import at module level: the planner reads WORKLOADS without torch.
"""
from opmatrix.kit import ITEMSIZE

WORKLOADS = {
    # GPU-sized. The model profile's Llama (opmatrix.profile.targets, preset gpu: intermediate 5632, batch 4 x
    # sequence 2048): a prefill step (277 MB in bf16) and a decode step (4 tokens: 135 KB, launch-bound).
    "llama_prefill": {"tokens": 8192, "intermediate": 5632},
    "llama_decode": {"tokens": 4, "intermediate": 5632},
    # Llama-3-8B-like: intermediate 14336, the same 8192 tokens (705 MB in bf16)
    "llama8b_prefill": {"tokens": 8192, "intermediate": 14336},
    # CPU-sized: a few hundred elements per row; the ragged one has no size a power of 2 or a multiple of 8
    "small_512": {"tokens": 128, "intermediate": 512},
    "ragged_689": {"tokens": 67, "intermediate": 689},
}

# Relative error of the whole output against the fp64 reference: output rounding dominates.
TOLERANCE = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-5}
DTYPES = tuple(TOLERANCE)  # the dtypes this kernel is defined for: a matrix may name only these

# The inputs the judge draws (opmatrix.incell.contents), each call one kind, in secret. An LLM's MLP meets large
# pre-activations in a few intermediate channels: the "massive activations" of Sun et al. 2024 (~1e3-1e4 in the
# residual stream) are written by down_proj from this product, large where gate and up both are. `large`: 1 in
# _LARGE_EVERY intermediate channels (at least one), chosen by the seed, have gate and up _LARGE x N(0, 2^2) (|gate|
# up to ~150); the rest as `normal`. silu's exp then leaves fp16 (exp(11) > 65504) and, for |gate| > 88, fp32: a
# kernel must compute it as the limit (silu(-100) ~ 0, silu(100) = 100), not inf / inf, and must not clamp its inputs.
# The product stays within fp16 (|gate x up| <= ~2.5e4 at 5 sigma each).
INPUT_KINDS = ("normal", "large")
_LARGE, _LARGE_EVERY = 16.0, 32


def describe(w: dict) -> str:
    return f"tokens={w['tokens']} intermediate={w['intermediate']}"


def flops(w: dict) -> float:
    """silu (exp, add, divide, multiply) and the product: about 5 operations per element."""
    return 5.0 * w["tokens"] * w["intermediate"]


def min_bytes(w: dict, dtype: str) -> float:
    """gate and up read once, out written once."""
    return float(ITEMSIZE[dtype] * 3 * w["tokens"] * w["intermediate"])


def tolerance(dtype: str) -> float:
    return TOLERANCE[dtype]


def make_inputs(w: dict, dtype: str, device: str, seed: int) -> tuple:
    """Seeded gate, up ~ N(0, 2^2): the activation's curved region and both tails (never zeros); with large channels
    where w["inputs"] is "large" (INPUT_KINDS)."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    dt = getattr(torch, dtype)
    shape = (w["tokens"], w["intermediate"])
    gate = 2 * torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
    up = 2 * torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
    if w.get("inputs", "normal") == "large":
        count = max(1, w["intermediate"] // _LARGE_EVERY)
        channels = torch.randperm(w["intermediate"], generator=gen, device=device)[:count]
        gate[:, channels] *= _LARGE
        up[:, channels] *= _LARGE
    return gate.to(dt), up.to(dt)


def make_output(w: dict, dtype: str, device: str):
    import torch

    return torch.empty(w["tokens"], w["intermediate"], device=device, dtype=getattr(torch, dtype))


def reference(inputs: tuple, w: dict):
    import torch

    gate, up = (t.double() for t in inputs)
    return gate * torch.sigmoid(gate) * up
