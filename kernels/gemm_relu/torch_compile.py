"""torch.compile (inductor, default mode) of relu(a @ b) written into the output buffer.

Inductor keeps the matmul as a library call and fuses relu with the store into `out`."""
import torch

from opmatrix.kit import Built


def build(workload, dtype, device, variant):
    @torch.compile(dynamic=False, fullgraph=True)
    def gemm_relu(a, b, out):
        out.copy_(torch.relu(a @ b))

    return Built(gemm_relu, {"mode": "default", "dynamic": False})
