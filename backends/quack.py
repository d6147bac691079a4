"""quack (quack-kernels, Tri Dao's group): memory-bound kernels (RMSNorm, softmax, cross-entropy) written in CuTe
DSL, called as a library. NVIDIA sm_90 and later (its kernels use thread-block clusters); on a CPU host its kernel
classes compile over fake tensors to real sm_90a / sm_100a cubins."""
from opmatrix.kit import nvidia, require

COMPILES_ON_FIRST_CALL = True


def available() -> str:
    require("quack")
    from importlib.metadata import version

    return version("quack-kernels")


def covers(device) -> str | None:
    return nvidia.host_reason(device, "quack", min_sm=90)


def environment(device, cache_dir) -> dict:
    return {"CUTE_DSL_CACHE_DIR": str(cache_dir / "cute_dsl")}
