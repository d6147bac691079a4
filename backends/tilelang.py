"""TileLang: tile-level kernels compiled through TVM to CUDA (NVIDIA), HIP (AMD) or C (CPU)."""
from opmatrix.kit import require


def available() -> str:
    tilelang = require("tilelang")
    return tilelang.__version__


def covers(device) -> str | None:
    import torch

    if device.vendor == "cpu":
        return None  # TileLang's "c" target; implementations decide which of their variants run there
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no GPU on this host (TileLang launches through torch tensors)"
    return None


def environment(device, cache_dir) -> dict:
    # TileLang keeps compiled kernels in ~/.tilelang/cache; a job's own empty folder makes compile time cold.
    return {"TILELANG_CACHE_DIR": str(cache_dir / "tilelang"), "TVM_FFI_CACHE_DIR": str(cache_dir / "tvm_ffi")}
