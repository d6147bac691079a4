"""PyTorch: scaled_dot_product_attention with enable_gqa (the KV heads shared by their query heads without a copy),
what a model's decode step calls; SDPA chooses its backend."""
import torch

from opmatrix.kit import Built, load_spec

spec = load_spec(__file__)
RETURNS_OUTPUT = True  # SDPA allocates its output; a copy into `out` would be work the framework never does


def build(workload, dtype, device, variant):
    scale = spec.softmax_scale(workload["head_dim"])

    def attention(q, k, v, out):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=True)

    return Built(attention, {"sdpa_backend": "chosen by SDPA", "enable_gqa": True})
