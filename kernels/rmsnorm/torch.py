"""Eager PyTorch: torch.nn.functional.rms_norm, the framework's own op (it allocates its output)."""
import torch

from opmatrix.kit import Built, load_spec

spec = load_spec(__file__)
RETURNS_OUTPUT = True  # F.rms_norm allocates; copying into `out` would add a pass the framework never makes


def build(workload, dtype, device, variant):
    shape = (workload["hidden"],)

    def rmsnorm(x, weight, out):
        return torch.nn.functional.rms_norm(x, shape, weight, spec.EPS)

    return Built(rmsnorm)
