"""CuTe DSL (CUTLASS 4's Python DSL, package nvidia-cutlass-dsl, module `cutlass`): CuTe layouts and atoms written in
Python, JIT-compiled through MLIR to a cubin. NVIDIA GPUs only; on a CPU host `cute.compile` over fake tensors with
`--gpu-arch sm_90a` / `sm_100a` builds the real cubin (never run)."""
from opmatrix.kit import nvidia, require


def available() -> str:
    return require("cutlass").__version__


def covers(device) -> str | None:
    return nvidia.host_reason(device, "CuTe DSL")


def environment(device, cache_dir) -> dict:
    return {"CUTE_DSL_CACHE_DIR": str(cache_dir / "cute_dsl")}
