"""torch.compile (inductor) of scaled_dot_product_attention: what the compiler makes of the framework op."""
import torch

from opmatrix.kit import Built, load_spec

spec = load_spec(__file__)
RETURNS_OUTPUT = True


def build(workload, dtype, device, variant):
    causal, scale = workload["causal"], spec.softmax_scale(workload["head_dim"])

    @torch.compile(dynamic=False, fullgraph=True)
    def attention(q, k, v, out):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

    return Built(attention, {"mode": "default", "dynamic": False})
