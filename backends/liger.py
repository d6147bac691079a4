"""Liger-Kernel (LinkedIn's Triton kernels for LLM training: RMSNorm, SwiGLU, RoPE, ...), called as a library: the
contestant is the library's own kernel. On a CPU Triton's interpreter (TRITON_INTERPRET=1) runs the kernels that
it can: correctness only. Compile-only builds compile the library's Triton kernel for the device."""
from opmatrix.kit import require
from opmatrix.kit.triton_rules import covers, environment, timed  # noqa: F401 (its hooks: Triton's rules)

COMPILES_ON_FIRST_CALL = True


def available() -> str:
    require("liger_kernel")
    from importlib.metadata import version

    return version("liger-kernel")
