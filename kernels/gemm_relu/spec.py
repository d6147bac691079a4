"""gemm_relu: C = relu(A @ B), A is M x K, B is K x N, row-major, one dtype in and out (fp32 accumulation).

The seed's example operator: a matrix product with a fused elementwise epilogue. Eager frameworks run it as two
kernels (matmul, then relu over C); a fused kernel saves one read and one write of C.
No framework import at module level: the planner reads WORKLOADS without torch.
"""
from opmatrix.kit import ITEMSIZE

WORKLOADS = {
    # GPU-sized
    "square_4096": {"M": 4096, "N": 4096, "K": 4096},
    "square_8192": {"M": 8192, "N": 8192, "K": 8192},
    "llm_skinny": {"M": 4096, "N": 1024, "K": 8192},  # a projection: many tokens, narrow output, deep reduction
    "ragged_4097": {"M": 4097, "N": 4095, "K": 4096},  # no dimension a multiple of a tile size
    # partial tiles in every dimension, with rows a multiple of 16 bytes (what TMA copies need)
    "partial_tiles": {"M": 4000, "N": 3000, "K": 4040},
    # CPU-sized (the same shapes scaled so interpreters and C loops finish)
    "square_512": {"M": 512, "N": 512, "K": 512},
    "ragged_257": {"M": 257, "N": 263, "K": 255},
    "tiny_ragged": {"M": 67, "N": 61, "K": 53},  # for tests
}

# Relative error ||out - ref|| / ||ref|| against the fp64 reference. Rounding of the output alone costs about
# 2^-11 (fp16) and 2^-8 (bf16) relative per element; fp32 accumulation over K adds far less.
TOLERANCE = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-4}
DTYPES = tuple(TOLERANCE)  # the dtypes this kernel is defined for: a matrix may name only these


def describe(w: dict) -> str:
    return f"M={w['M']} N={w['N']} K={w['K']}"


def flops(w: dict) -> float:
    return 2.0 * w["M"] * w["N"] * w["K"]


def min_bytes(w: dict, dtype: str) -> float:
    """Each input read once and the output written once."""
    size = ITEMSIZE[dtype]
    return float(size * (w["M"] * w["K"] + w["K"] * w["N"] + w["M"] * w["N"]))


def tolerance(dtype: str) -> float:
    return TOLERANCE[dtype]


def make_inputs(w: dict, dtype: str, device: str, seed: int) -> tuple:
    """Seeded standard-normal A and B (never zeros: zeros hide unwritten outputs and run faster than data)."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    dt = getattr(torch, dtype)
    a = torch.randn(w["M"], w["K"], generator=gen, device=device, dtype=torch.float32).to(dt)
    b = torch.randn(w["K"], w["N"], generator=gen, device=device, dtype=torch.float32).to(dt)
    return a, b


def make_output(w: dict, dtype: str, device: str):
    import torch

    return torch.empty(w["M"], w["N"], device=device, dtype=getattr(torch, dtype))


def reference(inputs: tuple, w: dict):
    """relu(A @ B) in float64 through the framework, on the inputs as given (already rounded to the dtype)."""
    import torch

    a, b = inputs
    return torch.relu(a.double() @ b.double())
