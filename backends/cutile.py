"""cuTile (NVIDIA's CUDA Tile, `cuda.tile`): tile kernels in Python compiled by tileiras to a cubin. NVIDIA GPUs only,
no CPU mode; on a CPU host its compile-only builds (`cuda.tile.compilation.export_kernel`) still make real sm_90 /
sm_100 cubins, which need the `nvidia-cuda-tileiras` package beside `cuda-tile`."""
from opmatrix.kit import nvidia, require


def available() -> str:
    return require("cuda.tile").__version__


def covers(device) -> str | None:
    return nvidia.host_reason(device, "cuTile")


def environment(device, cache_dir) -> dict:
    return {"CUDA_TILE_CACHE_DIR": str(cache_dir / "cutile")}
