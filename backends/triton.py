"""Triton: block-level kernels JIT-compiled for NVIDIA and AMD GPUs. On CPU only its interpreter runs them
(TRITON_INTERPRET=1, numpy underneath): correct results, no meaningful speed, so CPU rows are correctness-only."""
from opmatrix.kit import require
from opmatrix.kit.triton_rules import covers, environment, timed  # noqa: F401 (its hooks: Triton's rules)

COMPILES_ON_FIRST_CALL = True


def available() -> str:
    triton = require("triton")
    return triton.__version__
