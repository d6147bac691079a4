"""Eager PyTorch, written as transformers' LlamaMLP writes it, `act_fn(gate) * up` with act_fn = silu: two
kernels (F.silu, then the product), the activation written and read back in between. The product writes into
`out` (`out=`), where the model would allocate it: the same memory traffic, no copy."""
import torch

from opmatrix.kit import Built


def build(workload, dtype, device, variant):
    def swiglu(gate, up, out):
        torch.mul(torch.nn.functional.silu(gate), up, out=out)

    return Built(swiglu)
