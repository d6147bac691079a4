"""What a compile-only CUDA binary is, read from the binary itself: for the tile DSLs whose compilers hand back a
cubin without a ptxas report to read (cuTile's `export_kernel`, CuTe DSL's `--keep-cubin`).

- `sm(binary)`: the SM version the ELF header says the cubin is for (the `EF_CUDA_SM` bits of e_flags), so a row
  states the arch its binary was built for, not the one it asked for;
- `resources(binary)`: registers and local memory per thread from `cuobjdump -res-usage` (the CUDA toolkit's, or
  the copy Triton ships), {} where no cuobjdump is here;
- `describe(arch, binary)`: the text of a compiles row, "sm_90a cubin using wgmma, 168 registers, no local memory (81760 bytes)".
Stdlib only: the cells that call it may have no Triton and no torch.
"""
from __future__ import annotations

import importlib.util
import re
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

_ELF_MAGIC = b"\x7fELF"
_REG = re.compile(r"REG:(\d+)")
_LOCAL = re.compile(r"LOCAL:(\d+)")
# tensor-core instructions in the SASS: Hopper's warpgroup MMA, Blackwell's tcgen05 MMA, the warp-level mma.sync
_MMA = (("wgmma", re.compile(r"\bHGMMA\b")), ("tcgen05", re.compile(r"\bUTC[A-Z]*MMA\b")),
        ("mma.sync", re.compile(r"\bHMMA\b")))


class NotACubin(ValueError):
    """The bytes a compiler handed back are not a CUDA ELF binary."""


def sm(binary: bytes) -> int:
    """The SM version in the cubin's ELF header (90 for sm_90 / sm_90a, 100 for sm_100a). CUDA 12.8+ writes it in
    bits 8-15 of e_flags (ELF ABI version 8); older cubins in bits 0-7."""
    if len(binary) < 52 or binary[:4] != _ELF_MAGIC or binary[4] != 2:
        raise NotACubin(f"not a 64-bit ELF file ({len(binary)} bytes, starting {binary[:4]!r})")
    flags = struct.unpack_from("<I", binary, 48)[0]
    return (flags >> 8) & 0xFF if binary[8] >= 8 else flags & 0xFF


def cuobjdump() -> str | None:
    """The CUDA toolkit's cuobjdump on PATH, else the copy Triton's wheel carries (found without importing Triton),
    else None."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    spec = importlib.util.find_spec("triton")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / "backends" / "nvidia" / "bin" / "cuobjdump"
        if candidate.is_file():
            return str(candidate)
    return None


def resources(binary: bytes) -> dict:
    """{"registers": N, "local_bytes": M, "mma": "wgmma" | "tcgen05" | "mma.sync" | ""}: the most registers and
    local memory per thread of any kernel in the cubin (local memory holds spills and local arrays) and the
    tensor-core instructions its SASS uses; {} where no cuobjdump is here or it cannot read the file."""
    tool = cuobjdump()
    if tool is None:
        return {}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(binary)
        out = subprocess.run([tool, "-res-usage", str(path)], capture_output=True, text=True, timeout=120)
        sass = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True, timeout=120).stdout
    registers = [int(n) for n in _REG.findall(out.stdout)]
    if out.returncode != 0 or not registers:
        return {}
    mma = next((name for name, pattern in _MMA if pattern.search(sass)), "")
    return {"registers": max(registers), "local_bytes": max(int(n) for n in _LOCAL.findall(out.stdout)), "mma": mma}


def describe(arch: str, binary: bytes, extra: str = "") -> tuple[str, dict]:
    """The text of a compiles row and the facts for its config: the arch the binary is for (refused when the ELF
    header says another SM than `arch` asked for), `extra` (what the kernel uses), registers and local memory,
    the size. Raises NotACubin for anything that is not one."""
    built = sm(binary)
    wanted = int(arch.removeprefix("sm_").rstrip("af"))
    if built != wanted:
        raise NotACubin(f"asked for {arch}, the cubin's ELF header says sm_{built}")
    found = resources(binary)
    text = ""
    if found:
        local = f"{found['local_bytes']} bytes of local memory" if found["local_bytes"] else "no local memory"
        using = f" using {found['mma']}" if found["mma"] else ""
        text = f"{using}, {found['registers']} registers, {local}"
    return f"{arch} cubin{extra}{text} ({len(binary)} bytes)", dict(found, cubin_bytes=len(binary))
