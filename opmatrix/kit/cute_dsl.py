"""CuTe DSL compile-only builds (our own CuTe DSL kernels and quack's, which are CuTe DSL too): `cute.compile` over
fake tensors (`cute.runtime.make_fake_tensor`) with `--gpu-arch sm_90a` / `sm_100a` builds the real cubin on a CPU
host; `--keep-cubin` writes it to a folder of this call's own, and opmatrix.kit.cubin reads it back (arch, registers,
local memory, size)."""
from __future__ import annotations

import tempfile
from pathlib import Path

from opmatrix.incell.plugins import Compiled
from opmatrix.kit import cubin, nvidia


def dtype(name: str):
    import cutlass

    return {"float16": cutlass.Float16, "bfloat16": cutlass.BFloat16, "float32": cutlass.Float32}[name]


def compile_for(fn, args: tuple, device, config: dict, what: str, options: str = "", min_sm: int = 80) -> Compiled:
    """Compile `fn(*args)` (fake tensors) for `device`, never run; `what` names the library in the row."""
    import cutlass.cute as cute

    nvidia.require(device, what, min_sm)
    arch = nvidia.arch_label(device)
    with tempfile.TemporaryDirectory() as folder:
        cute.compile(fn, *args, options=f"{options} --gpu-arch {arch} --keep-cubin --dump-dir {folder}".strip())
        binaries = sorted(Path(folder).rglob("*.cubin"))
        if len(binaries) != 1:
            raise RuntimeError(f"cute.compile --keep-cubin left {len(binaries)} cubins in its dump folder, not one")
        text, facts = cubin.describe(arch, binaries[0].read_bytes(), f" by {what}")
    return Compiled("compiles", text, dict(config, **facts))
