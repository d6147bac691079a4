"""Engineering effort as the evidence beside a verdict shows it: the lines of code a backend's implementation of a
kernel takes (kernels/<op>/<backend>.py and the sources beside it that carry its name, e.g. cutlass_gemm_relu.cu),
blank lines and comment-only lines not counted."""
from __future__ import annotations

from pathlib import Path

SOURCE_SUFFIXES = {".py", ".cu", ".cuh", ".cpp", ".h", ".hpp", ".hip"}


def lines_of_code(kernels_dir: Path, kernel: str, backend: str) -> int | None:
    folder = Path(kernels_dir) / kernel
    stem = backend.replace("-", "_")
    files = [p for p in folder.glob(f"{stem}*") if p.suffix in SOURCE_SUFFIXES
             and (p.stem == stem or p.stem.startswith(stem + "_"))]
    if not files:
        return None
    return sum(_count(p) for p in files)


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
