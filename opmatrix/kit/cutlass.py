"""The CUTLASS toolchain: nvcc, CUTLASS's headers and a cache of built shared libraries.

Shared by backends/cutlass.py (is the toolchain here? which versions?) and every kernels/<op>/cutlass.py (build
its .cu file into a library), so neither reaches into the other's file. nvcc is found on PATH, $CUDACXX,
$CUDA_HOME/bin or /usr/local/bin; CUTLASS's headers come from `CUTLASS_DIR` if set, else from the copy that ships
inside the TileLang wheel (tilelang/3rdparty/cutlass, found without importing TileLang). Builds need no GPU:
without one (compile-only cells) the same library is built for a device no host has. Stdlib only.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from opmatrix.incell.plugins import Unavailable

CACHE_ENV = "OPMATRIX_CUTLASS_CACHE"  # where built libraries are kept (backends/cutlass.py: one per cell)


def find_nvcc() -> str | None:
    for candidate in (os.environ.get("CUDACXX"), shutil.which("nvcc"),
                      os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc"),
                      "/usr/local/bin/nvcc"):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


@functools.lru_cache(maxsize=None)
def nvcc_version(nvcc: str) -> str:
    """'13.0' from nvcc's 'Cuda compilation tools, release 13.0, V13.0.88'."""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"release (\d+\.\d+)", out)
    return match.group(1) if match else out.strip().splitlines()[-1]


def find_cutlass() -> tuple[Path, str] | None:
    """(CUTLASS root holding include/cutlass/version.h, where it came from), or None."""
    roots = []
    if os.environ.get("CUTLASS_DIR"):
        root = Path(os.environ["CUTLASS_DIR"])
        roots.append((root.parent if root.name == "include" else root, "CUTLASS_DIR"))
    spec = importlib.util.find_spec("tilelang")  # locates the package without importing it (slow)
    if spec is not None and spec.submodule_search_locations:
        try:
            where = f"tilelang {importlib.metadata.version('tilelang')} headers"
        except importlib.metadata.PackageNotFoundError:
            where = "tilelang headers"
        roots += [(Path(loc) / "3rdparty" / "cutlass", where) for loc in spec.submodule_search_locations]
    for root, where in roots:
        if (root / "include" / "cutlass" / "version.h").is_file():
            return root, where
    return None


def cutlass_version(root: Path) -> str:
    text = (root / "include" / "cutlass" / "version.h").read_text()
    parts = [re.search(rf"#define CUTLASS_{name}\s+(\d+)", text) for name in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(p.group(1) for p in parts) if all(parts) else "unknown"


def include_flags(root: Path) -> list[str]:
    dirs = [root / "include", root / "tools" / "util" / "include"]  # the second holds cutlass/util/*.hpp
    return [f"-I{d}" for d in dirs if d.is_dir()]


def toolchain() -> tuple[str, Path, str]:
    """(nvcc, CUTLASS root, where the headers came from), or Unavailable saying what is missing."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise Unavailable("nvcc not found (PATH, $CUDACXX, $CUDA_HOME/bin, /usr/local/bin): CUTLASS kernels are "
                          "compiled from CUDA C++")
    found = find_cutlass()
    if found is None:
        raise Unavailable("CUTLASS headers not found: set CUTLASS_DIR to a CUTLASS checkout, or install the "
                          "tilelang wheel (it ships them in tilelang/3rdparty/cutlass)")
    return nvcc, found[0], found[1]


def describe() -> str:
    """'CUTLASS 4.2.0 (tilelang 0.1.15 headers), nvcc 13.0', or Unavailable."""
    nvcc, root, where = toolchain()
    try:
        version = nvcc_version(nvcc)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise Unavailable(f"{nvcc} --version failed: {exc}") from None
    return f"CUTLASS {cutlass_version(root)} ({where}), nvcc {version}"


def library_cache() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "opmatrix" / "cutlass")


def build_shared_library(source: Path, flags: list[str]) -> tuple[Path, bool]:
    """nvcc `source` into a shared library (host and device code) in the cache folder. Returns (library, built):
    built is False when an identical build was found in the cache."""
    library, built, _ = _build(source, flags, ".so")
    return library, built


def build_cubin(source: Path, flags: list[str]) -> tuple[Path, bool, str]:
    """nvcc `source`'s device code alone into a cubin (no host compile: a device no host has can run nothing built
    here, and the host half is the same on every device), with ptxas' resource report. Returns (cubin, built,
    report): the report is kept beside the cubin, so a cached build still has it (opmatrix.kit.ptxas reads it)."""
    return _build(source, [*flags, "--cubin", "-Xptxas", "-v"], ".cubin")


def _build(source: Path, flags: list[str], suffix: str) -> tuple[Path, bool, str]:
    """nvcc `source` into the cache folder, named by a hash of (source text, nvcc version, CUTLASS version, flags)
    so an identical build is reused. Written to a temporary file, then renamed into place (atomic: a concurrent job
    sees the whole artifact or none), with nvcc's diagnostics beside it (`<artifact>.log`). nvcc failing raises
    RuntimeError. Returns (artifact, built, diagnostics)."""
    nvcc, root, _ = toolchain()
    command_flags = flags + include_flags(root)
    key = "\0".join([source.read_text(), nvcc_version(nvcc), cutlass_version(root), *command_flags])
    target = library_cache() / f"{source.stem}-{hashlib.sha256(key.encode()).hexdigest()[:16]}{suffix}"
    log = target.with_name(target.name + ".log")
    if target.is_file():
        return target, False, log.read_text() if log.is_file() else ""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=suffix + ".tmp", dir=target.parent)
    os.close(fd)
    try:
        proc = subprocess.run([nvcc, *command_flags, "-o", tmp, str(source)], capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout)[-3000:]
            raise RuntimeError(f"nvcc failed (exit {proc.returncode}) on {source.name}:\n{tail}")
        report = proc.stderr + proc.stdout
        log_tmp = log.with_name(log.name + f".{os.getpid()}.tmp")
        log_tmp.write_text(report)
        os.replace(log_tmp, log)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target, True, report

