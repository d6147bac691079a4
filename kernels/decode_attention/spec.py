"""Decode attention: one new token's query per sequence against its KV cache, grouped-query (GQA: `heads` query
heads share `kv_heads` key/value heads, as Llama 3 does), no mask (the one query sees every cached position).
q: (batch, heads, 1, head_dim); k, v: (batch, kv_heads, kv_len, head_dim); out like q. A serving engine's step is
this, memory-bound: the whole KV cache is read for a few flops per element.
No framework import at module level: the planner reads WORKLOADS without torch.
"""
from opmatrix.kit import ITEMSIZE, UNIT_ROUNDOFF

WORKLOADS = {
    # Llama 3 8B's attention (32 query heads, 8 KV heads, head_dim 128): one sequence with a long cache, and a batch
    "llama8b_b1_kv8192": {"batch": 1, "heads": 32, "kv_heads": 8, "kv_len": 8192, "head_dim": 128},
    "llama8b_b16_kv2048": {"batch": 16, "heads": 32, "kv_heads": 8, "kv_len": 2048, "head_dim": 128},
    # CPU-sized; a cache length no block size divides
    "b2_h4_kv2_len129_d64": {"batch": 2, "heads": 4, "kv_heads": 2, "kv_len": 129, "head_dim": 64},
}

TOLERANCE = {"float16": 3e-3, "bfloat16": 2e-2, "float32": 1e-4}
DTYPES = tuple(TOLERANCE)  # the dtypes this kernel is defined for: a matrix may name only these

# As for flash attention (kernels/flash_attention/spec.py): a trained model's logits are far from N(0, 1), and a
# kernel must subtract the row's maximum; `large_logits` scales q and k by _LARGE_QK (logits ~ N(0, 25^2)).
INPUT_KINDS = ("normal", "large_logits")
_LARGE_QK = 5.0


def describe(w: dict) -> str:
    return (f"batch={w['batch']} heads={w['heads']} kv_heads={w['kv_heads']} kv_len={w['kv_len']} "
            f"head_dim={w['head_dim']}")


def flops(w: dict) -> float:
    """q.k and p.v for every query head over the cache."""
    return 4.0 * w["batch"] * w["heads"] * w["kv_len"] * w["head_dim"]


def min_bytes(w: dict, dtype: str) -> float:
    """The cache read once (each KV head serves heads / kv_heads query heads), q read and out written."""
    size = ITEMSIZE[dtype]
    return float(size * w["batch"] * w["head_dim"] * (2 * w["kv_heads"] * w["kv_len"] + 2 * w["heads"]))


def tolerance(dtype: str) -> float:
    return TOLERANCE[dtype]


def elementwise_tolerance(dtype: str) -> tuple[float, float]:
    """(atol in units of the row's rms, rtol): flash attention's (kernels/flash_attention/spec.py says why), whose
    kernels round P to the input dtype before P @ V as decode kernels do."""
    if dtype == "float32":
        return (3e-4, 1e-5)
    u = UNIT_ROUNDOFF[dtype]
    return (5 * u, 2 * u)


def softmax_scale(head_dim: int) -> float:
    """The factor on q.k: every implementation and the reference use this one (SDPA's default is the same)."""
    return head_dim ** -0.5


def make_inputs(w: dict, dtype: str, device: str, seed: int) -> tuple:
    """Seeded q, k, v ~ N(0, 1); q and k x _LARGE_QK where w["inputs"] is "large_logits" (INPUT_KINDS)."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    scale = _LARGE_QK if w.get("inputs", "normal") == "large_logits" else 1.0
    shapes = ((w["batch"], w["heads"], 1, w["head_dim"]),) + ((w["batch"], w["kv_heads"], w["kv_len"],
                                                               w["head_dim"]),) * 2
    return tuple((factor * torch.randn(shape, generator=gen, device=device, dtype=torch.float32)).to(
        getattr(torch, dtype)) for shape, factor in zip(shapes, (scale, scale, 1.0)))


def make_output(w: dict, dtype: str, device: str):
    import torch

    return torch.empty(w["batch"], w["heads"], 1, w["head_dim"], device=device, dtype=getattr(torch, dtype))


def reference(inputs: tuple, w: dict):
    """float64: each query head against its KV head (query head h reads KV head h // (heads / kv_heads))."""
    import torch

    q, k, v = (t.double() for t in inputs)
    group = w["heads"] // w["kv_heads"]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-1, -2)) * softmax_scale(w["head_dim"])
    return torch.softmax(scores, dim=-1) @ v
