"""Eager PyTorch. `default`: torch.nn.functional.rms_norm, the framework's own op (it allocates its output).
`llama`: the norm as transformers' LlamaRMSNorm.forward writes it (x to fp32, mean of squares, rsqrt, back to the
dtype, times the weight: each op its own kernel), the code a Llama model runs and the reference its swapped-in
kernels are judged against (opmatrix.sites.registry, `eager`)."""
import torch

from opmatrix.kit import Built, load_spec

spec = load_spec(__file__)
VARIANTS = ("default", "llama")
RETURNS_OUTPUT = True  # both allocate; copying into `out` would add a pass the framework never makes


def build(workload, dtype, device, variant):
    shape = (workload["hidden"],)
    eps = spec.EPS

    def rmsnorm(x, weight, out):
        return torch.nn.functional.rms_norm(x, shape, weight, eps)

    def llama_rmsnorm(x, weight, out):
        h = x.to(torch.float32)
        variance = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + eps)
        return weight * h.to(x.dtype)

    return Built(llama_rmsnorm if variant == "llama" else rmsnorm)
