"""FlashAttention 4 (flash-attn-4, module `flash_attn.cute`): Tri Dao's attention forward written in CuTe DSL for
Hopper (sm_90) and Blackwell (sm_100), called as a library. NVIDIA sm_90 and later only."""
from opmatrix.kit import nvidia, require

COMPILES_ON_FIRST_CALL = True


def available() -> str:
    require("flash_attn.cute")
    from importlib.metadata import version

    return version("flash-attn-4")


def covers(device) -> str | None:
    return nvidia.host_reason(device, "FlashAttention 4", min_sm=90)


def environment(device, cache_dir) -> dict:
    return {"CUTE_DSL_CACHE_DIR": str(cache_dir / "cute_dsl")}
