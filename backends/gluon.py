"""Gluon (`triton.experimental.gluon`, Triton 3.9): Triton's lower-level language, where layouts, shared memory and
the tensor-core instructions are written out. Compiled by Triton for NVIDIA (and AMD) GPUs; Triton's interpreter does
not run Gluon, so a CPU has no Gluon rows. Compile-only builds go through `triton.compile` like Triton's."""
from opmatrix.kit import require


def available() -> str:
    require("triton.experimental.gluon")
    return require("triton").__version__


def covers(device) -> str | None:
    if device.vendor == "cpu":
        return "Gluon has no CPU mode (Triton's interpreter runs Triton kernels, not Gluon's explicit layouts)"
    import torch

    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no GPU on this host"
    return None


def environment(device, cache_dir) -> dict:
    return {"TRITON_CACHE_DIR": str(cache_dir / "triton")}
