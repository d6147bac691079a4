"""torch.compile (inductor) of scaled_dot_product_attention: what the compiler makes of the framework op."""
import torch

RETURNS_OUTPUT = True


def build(workload, dtype, device, variant):
    causal = workload["causal"]

    @torch.compile(dynamic=False, fullgraph=True)
    def attention(q, k, v, out):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    attention.config = {"mode": "default", "dynamic": False}
    return attention
