"""out = 2 * x on the GPU: small, so that only the injected faults can go wrong."""
WORKLOADS = {"small": {"n": 1 << 20}}


def describe(w): return f"n={w['n']}"
def flops(w): return float(w["n"])
def min_bytes(w, dtype): return 8.0 * w["n"]
def tolerance(dtype): return 1e-6


def make_inputs(w, dtype, device, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(w["n"], generator=g, dtype=getattr(torch, dtype)).to(device),)


def make_output(w, dtype, device):
    import torch
    return torch.empty(w["n"], dtype=getattr(torch, dtype), device=device)


def reference(inputs, w):
    return inputs[0].double() * 2
