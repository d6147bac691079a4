"""torch.compile (inductor) of the framework's decode attention (SDPA with enable_gqa)."""
import torch

from opmatrix.kit import Built, load_spec

spec = load_spec(__file__)
RETURNS_OUTPUT = True


def build(workload, dtype, device, variant):
    scale = spec.softmax_scale(workload["head_dim"])

    @torch.compile(dynamic=False, fullgraph=True)
    def attention(q, k, v, out):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=True)

    return Built(attention, {"mode": "default", "dynamic": False})
