"""FlashInfer (flashinfer-python): the LLM-serving kernel library (attention, norms, sampling), called as a library.
NVIDIA GPUs only; its kernels are JIT-built with nvcc on first call on the GPU (or come from its AOT wheels), so a
CPU host has neither runs nor compile-only builds of them."""
from opmatrix.kit import nvidia, require

COMPILES_ON_FIRST_CALL = True


def available() -> str:
    return require("flashinfer").__version__


def covers(device) -> str | None:
    return nvidia.host_reason(device, "FlashInfer", min_sm=75)


def environment(device, cache_dir) -> dict:
    return {"FLASHINFER_WORKSPACE_BASE": str(cache_dir / "flashinfer")}
