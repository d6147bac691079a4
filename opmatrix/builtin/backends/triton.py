"""Triton: block-level kernels JIT-compiled for NVIDIA and AMD GPUs. On CPU only its interpreter runs them
(TRITON_INTERPRET=1, numpy underneath): correct results, no meaningful speed, so CPU rows are correctness-only."""
from opmatrix.kit import require

COMPILES_ON_FIRST_CALL = True


def available() -> str:
    triton = require("triton")
    return triton.__version__


def covers(device) -> str | None:
    import torch

    if device.vendor == "cpu":
        return None  # through the interpreter
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no GPU on this host"
    return None


def environment(device, cache_dir) -> dict:
    env = {"TRITON_CACHE_DIR": str(cache_dir / "triton")}
    if device.vendor == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return env


def timed(device) -> bool:
    return device.is_gpu  # the interpreter's speed says nothing about the kernel
