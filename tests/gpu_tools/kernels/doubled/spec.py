"""doubled: y = 2 x over a float32 vector. A kernel of the test suite (tests/gpu_tools/README.md): its Triton
implementation has a planted variant that reads past its input's end with correct outputs, for compute-sanitizer
(issue 47). No framework import at module level."""

WORKLOADS = {
    "n1m": {"n": 1 << 20},  # 4 MB per tensor: a GPU call of a few microseconds
    "small": {"n": 4096},  # the CPU's
}
TOLERANCE = {"float32": 1e-6}
DTYPES = tuple(TOLERANCE)


def describe(w: dict) -> str:
    return f"n={w['n']}"


def flops(w: dict) -> float:
    return float(w["n"])


def min_bytes(w: dict, dtype: str) -> float:
    return 8.0 * w["n"]


def tolerance(dtype: str) -> float:
    return TOLERANCE[dtype]


def make_inputs(w: dict, dtype: str, device: str, seed: int) -> tuple:
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(w["n"], generator=gen, device=device, dtype=getattr(torch, dtype)),)


def make_output(w: dict, dtype: str, device: str):
    import torch

    return torch.empty(w["n"], device=device, dtype=getattr(torch, dtype))


def reference(inputs: tuple, w: dict):
    return inputs[0].double() * 2
