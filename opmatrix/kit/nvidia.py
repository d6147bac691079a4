"""The coverage answers that every NVIDIA-only contestant gives alike (cuTile, CuTe DSL, quack, FlashInfer,
FlashAttention), in one place so the coverage grid says the same thing for each:

- `host_reason(device, what, min_sm)`: a backend's covers(device) on this host: None where its kernels can run here,
  else why not (a CPU, an AMD GPU, no GPU that torch sees, an older GPU than the library's floor);
- `require(device, what, min_sm)`: the same refusal for one build (build or compile_for), as Unsupported;
- `arch_label(device)`: sm_90 -> "sm_90a", sm_100 -> "sm_100a" (the arch-specific target the tile DSLs build for
  Hopper and Blackwell; wgmma and tcgen05 exist only there), older archs as they are.
Framework imports stay inside the functions.
"""
from __future__ import annotations

from opmatrix.incell.plugins import Unsupported
from opmatrix.kit import aot

_ARCH_SPECIFIC = (90, 100, 103)  # the archs with an 'a' target (sm_90a, sm_100a, sm_103a)


def arch_label(device) -> str:
    cc = aot.cuda_capability(device.arch)
    return f"sm_{cc}a" if cc in _ARCH_SPECIFIC else device.arch


def device_reason(device, what: str, min_sm: int = 0) -> str | None:
    """Why `what` cannot build for `device` (its vendor or arch), or None."""
    if device.vendor == "cpu":
        return f"{what} runs on NVIDIA GPUs only (no CPU backend)"
    if device.vendor != "nvidia":
        return f"{what} is NVIDIA-only: an AMD GPU ({device.arch}) needs a separate implementation"
    if min_sm and aot.cuda_capability(device.arch) < min_sm:
        return f"{what} needs sm_{min_sm} or later; {device.arch} is older"
    return None


def require(device, what: str, min_sm: int = 0) -> None:
    reason = device_reason(device, what, min_sm)
    if reason:
        raise Unsupported(reason)


def host_reason(device, what: str, min_sm: int = 0) -> str | None:
    """covers(device): device_reason, then whether torch sees a GPU here at all."""
    reason = device_reason(device, what, min_sm)
    if reason:
        return reason
    import torch

    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no GPU on this host ({what} launches on torch's CUDA tensors)"
    return None
