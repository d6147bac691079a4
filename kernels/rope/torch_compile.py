"""torch.compile (inductor) of the eager formula (Llama's apply_rotary_pos_emb): one generated kernel per output
slice, each element computed in fp32 and written once."""
import torch

from opmatrix.kit import Built


def build(workload, dtype, device, variant):
    heads, half = workload["heads"], workload["head_dim"] // 2

    def rotate_half(x):
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    @torch.compile(dynamic=False, fullgraph=True)
    def rope(q, k, cos, sin, out):
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        out[:, :heads].copy_(q * cos + rotate_half(q) * sin)
        out[:, heads:].copy_(k * cos + rotate_half(k) * sin)

    return Built(rope, {"mode": "default", "dynamic": False})
