"""flash_attention (forward): O = softmax(Q K^T / sqrt(d) [+ causal mask]) V, tensors (batch, heads, seq, head_dim).

Compute-bound at long sequences; a fused kernel never writes the seq x seq score matrix to memory.
No framework import at module level: the planner reads WORKLOADS without torch.
"""

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


def describe(w: dict) -> str:
    return (f"batch={w['batch']} heads={w['heads']} seq={w['seq']} head_dim={w['head_dim']}"
            + (" causal" if w["causal"] else ""))


def flops(w: dict) -> float:
    """Two matmuls of 2*seq*seq*head_dim per head; a causal mask halves the useful work."""
    total = 4.0 * w["batch"] * w["heads"] * w["seq"] ** 2 * w["head_dim"]
    return total / 2 if w["causal"] else total


def min_bytes(w: dict, dtype: str) -> float:
    size = {"float16": 2, "bfloat16": 2, "float32": 4}[dtype]
    return float(4 * size * w["batch"] * w["heads"] * w["seq"] * w["head_dim"])  # Q, K, V read; O written


def tolerance(dtype: str) -> float:
    return TOLERANCE[dtype]


def make_inputs(w: dict, dtype: str, device: str, seed: int) -> tuple:
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    shape = (w["batch"], w["heads"], w["seq"], w["head_dim"])
    return tuple(torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(getattr(torch, dtype))
                 for _ in range(3))


def make_output(w: dict, dtype: str, device: str):
    import torch

    return torch.empty(w["batch"], w["heads"], w["seq"], w["head_dim"], device=device, dtype=getattr(torch, dtype))


def reference(inputs: tuple, w: dict):
    """float64, one (batch, head) slice at a time so the seq x seq scores fit in memory at any size."""
    import torch

    q, k, v = inputs
    causal = w["causal"]
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)
    scale = q.shape[-1] ** -0.5
    seq = q.shape[-2]
    mask = torch.ones(seq, seq, dtype=torch.bool, device=q.device).tril() if causal else None
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            scores = (q[b, h].double() @ k[b, h].double().T) * scale
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            out[b, h] = torch.softmax(scores, dim=-1) @ v[b, h].double()
    return out
