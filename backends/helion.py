"""Helion (PyTorch's tile DSL): kernels written as PyTorch over tiles, compiled to Triton, with its own autotuner.
On a CPU its interpret mode (HELION_INTERPRET=1) runs the kernel's tiles as eager PyTorch ops: a real correctness
check of the kernel's logic, no meaningful speed, so CPU rows are correctness-only."""
from opmatrix.kit import require


def available() -> str:
    require("helion")
    from importlib.metadata import version

    return version("helion")


def covers(device) -> str | None:
    import torch

    if device.vendor == "cpu":
        return None  # interpret mode
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no GPU on this host"
    return None


def environment(device, cache_dir) -> dict:
    env = {"TRITON_CACHE_DIR": str(cache_dir / "triton"), "HELION_CACHE_DIR": str(cache_dir / "helion")}
    if device.vendor == "cpu":
        env["HELION_INTERPRET"] = "1"
    return env


def timed(device) -> bool:
    return device.is_gpu
