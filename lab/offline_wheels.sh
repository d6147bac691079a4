#!/usr/bin/env bash
# Wheels for a GPU host with no package index, carried as xz archives of *unpacked* wheels: xz packs the shared
# parts of two versions of one package (tilelang 0.1.14 and 0.1.15) into little more than one, so they fit the
# 64 MiB a device call carries. Made on a machine with an index:
#   (cd DIR_OF_UNPACKED_WHEELS && tar cf - tilelang-0.1.15-* | xz -9 > .bundle/c1/tl015.tar.xz)
# where each wheel was unpacked into a folder named as the wheel without `.whl`. On the host:
#   lab/offline_wheels.sh ARCHIVE...     -> /tmp/wheels/*.whl (zipped again; idempotent)
# then PIP_NO_INDEX=1 PIP_FIND_LINKS=/tmp/wheels for the cell environments.
set -euo pipefail
mkdir -p /tmp/wheels-unpacked /tmp/wheels
for archive in "$@"; do tar -C /tmp/wheels-unpacked -xJf "$archive"; done
python3 - <<'PY'
import pathlib, zipfile
unpacked, wheels = pathlib.Path("/tmp/wheels-unpacked"), pathlib.Path("/tmp/wheels")
for folder in sorted(p for p in unpacked.iterdir() if p.is_dir()):
    wheel = wheels / f"{folder.name}.whl"
    if not wheel.exists():
        with zipfile.ZipFile(wheel.with_suffix(".part"), "w", zipfile.ZIP_STORED) as z:
            for f in sorted(folder.rglob("*")):
                if f.is_file():
                    z.write(f, f.relative_to(folder).as_posix())
        wheel.with_suffix(".part").rename(wheel)
    print(wheel.name)
PY
rm -rf /tmp/wheels-unpacked
