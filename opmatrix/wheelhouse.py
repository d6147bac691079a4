"""Wheels for a host without a package index, carried as one xz archive of the wheels *unpacked*: a wheel is a zip
of separately deflated files, which xz cannot shrink further, while the unpacked files of one package (and of two
versions of it) share most of their bytes, which xz finds.

    python3 -m opmatrix.wheelhouse ARCHIVE FOLDER     # on the host: FOLDER/*.whl, zipped again

then `pip install --no-index --find-links FOLDER ...`, or a toolchain's `find_links = "FOLDER"` (a cell's
environment also takes the folders of PIP_FIND_LINKS). `opmatrix wheels` makes the archive from a matrix's
toolchains (opmatrix.commands.wheels). Stdlib only: the host runs this before it has anything else, from a
checkout or an installed opmatrix.
"""
from __future__ import annotations

import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

SUFFIX = ".whl"


@dataclass(frozen=True)
class Packed:
    archive: Path
    wheels: list[str]  # the wheels' file names
    wheel_bytes: int  # the wheels as downloaded
    unpacked_bytes: int
    archive_bytes: int


def pack(wheels: list[Path], archive: Path, staging: Path) -> Packed:
    """`wheels` unpacked under `staging` (one folder each, named as the wheel without `.whl`) and packed into
    `archive` by tar and xz at its strongest preset."""
    unpacked = 0
    for wheel in wheels:
        folder = staging / wheel.name[:-len(SUFFIX)]
        with zipfile.ZipFile(wheel) as z:
            z.extractall(folder)
            unpacked += sum(i.file_size for i in z.infolist())
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:xz", preset=9) as tar:
        for wheel in sorted(wheels):
            tar.add(staging / wheel.name[:-len(SUFFIX)], arcname=wheel.name[:-len(SUFFIX)])
    return Packed(archive, sorted(w.name for w in wheels), sum(w.stat().st_size for w in wheels), unpacked,
                  archive.stat().st_size)


def unpack(archive: Path, folder: Path) -> list[Path]:
    """The archive's wheels, zipped again into `folder` (an existing wheel is kept: idempotent). Members are
    extracted by tarfile's `data` filter: none may leave the staging folder, link outside it or be a device."""
    folder.mkdir(parents=True, exist_ok=True)
    staging = folder / ".unpacked"
    with tarfile.open(archive, "r:xz") as tar:
        tar.extractall(staging, filter="data")
    made = []
    for unpacked in sorted(p for p in staging.iterdir() if p.is_dir()):
        wheel = folder / (unpacked.name + SUFFIX)
        if not wheel.exists():
            part = wheel.with_suffix(".part")
            with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
                for f in sorted(unpacked.rglob("*")):
                    if f.is_file():
                        z.write(f, f.relative_to(unpacked).as_posix())
            part.rename(wheel)
        made.append(wheel)
    return made


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python3 -m opmatrix.wheelhouse ARCHIVE FOLDER   (the archive `opmatrix wheels` made)",
              file=sys.stderr)
        return 2
    archive, folder = Path(argv[0]), Path(argv[1])
    if not archive.is_file():
        print(f"opmatrix.wheelhouse: {archive}: no such file", file=sys.stderr)
        return 2
    try:
        wheels = unpack(archive, folder)
    except (tarfile.TarError, OSError, EOFError) as exc:
        print(f"opmatrix.wheelhouse: {archive} is not an archive `opmatrix wheels` made: {exc}", file=sys.stderr)
        return 2
    for wheel in wheels:
        print(wheel)
    print(f"{len(wheels)} wheel(s) in {folder}: pip install --no-index --find-links {folder} ...", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
