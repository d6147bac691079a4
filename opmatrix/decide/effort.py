"""Engineering effort as the evidence beside a verdict shows it: the lines of code a backend's implementation of a
kernel takes (kernels/<op>/<backend>.py and the sources beside it that carry its name, e.g. cutlass_gemm_relu.cu),
blank lines and comment-only lines not counted. The same files, with the kernel's spec.py, make the digest that
tells whether an implementation changed between two sessions of one run."""
from __future__ import annotations

import hashlib
from pathlib import Path

from opmatrix.incell.plugins import implementation_files


def lines_of_code(kernels_dir: Path, kernel: str, backend: str) -> int | None:
    files = implementation_files(kernels_dir, kernel, backend)
    if not files:
        return None
    return sum(_count(p) for p in files)


def source_digest(kernels_dir: Path, kernel: str, backend: str) -> str | None:
    """sha256 (first 16 hex digits) over the implementation's files and the kernel's spec.py, names and bytes."""
    files = implementation_files(kernels_dir, kernel, backend)
    if not files:
        return None
    digest = hashlib.sha256()
    for path in [Path(kernels_dir) / kernel / "spec.py", *files]:
        if path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def digests(kernels_dir: Path, pairs) -> dict[str, str]:
    """"kernel/backend" -> source_digest, as run.json stores it."""
    out = {}
    for kernel, backend in sorted(pairs):
        d = source_digest(kernels_dir, kernel, backend)
        if d is not None:
            out[f"{kernel}/{backend}"] = d
    return out


def changed(recorded: dict[str, str], now: dict[str, str]) -> list[str]:
    """The "kernel/backend" implementations whose sources differ from the recorded digests (both known)."""
    return sorted(k for k, d in now.items() if k in recorded and recorded[k] != d)


def _count(path: Path) -> int:
    count = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        text = line.strip()
        if text and not text.startswith(("#", "//")):
            count += 1
    return count


def table(kernels_dir: Path, pairs) -> dict[tuple[str, str], int]:
    """(kernel, backend) -> lines of code, for the pairs that have implementation files."""
    out = {}
    for kernel, backend in pairs:
        n = lines_of_code(kernels_dir, kernel, backend)
        if n is not None:
            out[(kernel, backend)] = n
    return out


def to_record(loc: dict[tuple[str, str], int]) -> dict[str, int]:
    """The table as run.json stores it: "kernel/backend" -> lines."""
    return {f"{kernel}/{backend}": n for (kernel, backend), n in sorted(loc.items())}


def from_record(record: dict[str, int]) -> dict[tuple[str, str], int]:
    return {tuple(key.split("/", 1)): n for key, n in record.items()}
