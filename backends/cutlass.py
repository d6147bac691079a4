"""CUTLASS: NVIDIA's C++ template library for tensor-core GEMMs, written at the lowest level we go.

An implementation here is a `.cu` file beside it (kernels/<op>/cutlass_*.cu) that instantiates a CUTLASS 3.x/4.x
kernel (for Hopper: TMA loads, wgmma, warp-specialized, a fused epilogue) and exports plain `extern "C"`
functions. Its `build()` compiles that file with nvcc into a shared library (the compile time the report shows)
and calls it through ctypes on torch's tensors and current stream. No Python package is involved: the backend
is nvcc plus CUTLASS's headers (opmatrix.kit.cutlass finds both and keeps the built libraries). NVIDIA only:
AMD GPUs need their own implementation (composable_kernel / hipBLASLt).
"""
from pathlib import Path

from opmatrix.kit import cutlass


def available() -> str:
    return cutlass.describe()


def covers(device) -> str | None:
    if device.vendor == "cpu":
        return "CUTLASS kernels run on NVIDIA GPUs only"
    if device.vendor != "nvidia":
        return ("CUTLASS is NVIDIA-only: an AMD GPU needs a separate implementation "
                "(composable_kernel / hipBLASLt)")
    import torch

    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no GPU on this host (CUTLASS kernels run on torch's tensors)"
    return None


def environment(device, cache_dir) -> dict:
    # One library cache per cell (cache_dir is <cell scratch>/<job>/cache): a CUTLASS translation unit takes
    # nvcc 25-35 s and the library serves every shape, so the cell's first job builds it cold and later jobs
    # load it and say so (compile_cache "warm").
    return {cutlass.CACHE_ENV: str(Path(cache_dir).parent.parent / "cutlass-cache")}
