"""The backend rules of anything whose kernels Triton compiles (Triton itself, libraries of Triton kernels such as
Liger-Kernel): on a CPU Triton's interpreter runs them (TRITON_INTERPRET=1): correct results, no meaningful speed,
so CPU rows are correctness-only; on a GPU they need one that torch sees; each job gets its own Triton cache.
Backend adapters import these hooks (opmatrix.incell.contract checks them as if written there). Stdlib only."""


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
