"""torch.compile (inductor) of the eager formula silu(gate) * up: one generated kernel, fp32 arithmetic, the
activation never written."""
import torch

from opmatrix.kit import Built


def build(workload, dtype, device, variant):
    @torch.compile(dynamic=False, fullgraph=True)
    def swiglu(gate, up, out):
        out.copy_(torch.nn.functional.silu(gate) * up)

    return Built(swiglu, {"mode": "default", "dynamic": False})
