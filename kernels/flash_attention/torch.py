"""PyTorch: scaled_dot_product_attention. `default` is what a model gets: SDPA choosing its backend itself (the
framework baseline, first so that it is the one paired against). The others pin one backend each, so each shows
as its own row: `math` is the eager reference path (materialises the scores), `flash`, `cudnn` and `efficient`
the fused kernels. A backend that cannot run this device/dtype/shape is `unsupported` with torch's own reason."""
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from opmatrix.kit import Built, Unsupported, load_spec

spec = load_spec(__file__)
VARIANTS = ("default", "math", "flash", "cudnn", "efficient")
RETURNS_OUTPUT = True  # SDPA allocates its output; a copy into `out` would be work the framework never does
_SDPA_BACKENDS = {"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                  "efficient": SDPBackend.EFFICIENT_ATTENTION}


def build(workload, dtype, device, variant):
    causal, scale = workload["causal"], spec.softmax_scale(workload["head_dim"])

    def sdpa(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

    if variant == "default":
        def attention(q, k, v, out):
            return sdpa(q, k, v)
    else:
        def attention(q, k, v, out):
            with sdpa_kernel([_SDPA_BACKENDS[variant]]):
                return sdpa(q, k, v)

    probe = torch.zeros(1, 1, 16, workload["head_dim"], device=device.torch, dtype=getattr(torch, dtype))
    try:  # a tiny call: does this backend take this device, dtype and head_dim at all?
        attention(probe, probe, probe, None)
    except RuntimeError as exc:
        raise Unsupported(f"SDPA backend {variant!r}: {str(exc).splitlines()[0][:200]}") from None
    return Built(attention, {"sdpa_backend": variant if variant != "default" else "chosen by SDPA"})
