"""FlashAttention 4 (flash-attn-4, module `flash_attn.cute`): Tri Dao's attention written in CuTe DSL, with kernels
for sm_80, sm_90 (Hopper) and sm_100 (Blackwell), called as a library. NVIDIA only.

Compile-only builds follow FA4's own recipe for a host without a GPU (flash_attn.cute.interface._get_device_arch):
FLASH_ATTENTION_ARCH picks its kernel, CUTE_DSL_ARCH the compilation target, FLASH_ATTENTION_NUM_SMS the SKU; the
call runs under torch's FakeTensorMode, and CUTE_DSL_KEEP=cubin leaves the cubin in the job's cache folder. CuTe DSL
reads these when it is imported, so they are the worker's environment, set only where torch sees no GPU."""
from opmatrix.kit import aot, nvidia, require

COMPILES_ON_FIRST_CALL = True
_MIN_SM = 80
_SMS = {90: 132, 100: 148}  # the fleet parts' SM counts (H200, B200), FA4's scheduler metadata


def available() -> str:
    require("flash_attn.cute")
    from importlib.metadata import version

    return version("flash-attn-4")


def covers(device) -> str | None:
    return nvidia.host_reason(device, "FlashAttention 4", min_sm=_MIN_SM)


def environment(device, cache_dir) -> dict:
    env = {"CUTE_DSL_CACHE_DIR": str(cache_dir / "cute_dsl")}
    if device.vendor != "nvidia":
        return env
    import torch

    if not torch.cuda.is_available():
        cc = aot.cuda_capability(device.arch)
        env.update(FLASH_ATTENTION_ARCH=f"sm_{cc}", CUTE_DSL_ARCH=nvidia.arch_label(device),
                   FLASH_ATTENTION_NUM_SMS=str(_SMS.get(cc, aot.known_sm_count(device))), CUTE_DSL_KEEP="cubin",
                   CUTE_DSL_DUMP_DIR=str(cache_dir / "fa4-cubins"))
    return env
