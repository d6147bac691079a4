"""Liger-Kernel (LinkedIn's Triton kernels for LLM training: RMSNorm, SwiGLU, RoPE, ...), called as a library: the
contestant is the library's own kernel. On a CPU Triton's interpreter (TRITON_INTERPRET=1) runs the kernels that
it can: correctness only. Compile-only builds compile the library's Triton kernel for the device."""
from opmatrix.kit import require

COMPILES_ON_FIRST_CALL = True


def available() -> str:
    require("liger_kernel")
    from importlib.metadata import version

    return version("liger-kernel")


def covers(device) -> str | None:
    import torch

    if device.vendor == "cpu":
        return None  # through Triton's interpreter
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no GPU on this host"
    return None


def environment(device, cache_dir) -> dict:
    env = {"TRITON_CACHE_DIR": str(cache_dir / "triton")}
    if device.vendor == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return env


def timed(device) -> bool:
    return device.is_gpu
