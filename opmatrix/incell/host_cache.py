"""The folder for what opmatrix keeps per host between runs: the measured ceilings (opmatrix.incell.kept_ceilings) and
inductor's vector-ISA test programs and precompiled header (opmatrix.kit.inductor_isa, inductor_header). The user's
cache folder ($XDG_CACHE_HOME, else ~/.cache) holds them under opmatrix/, or $OPMATRIX_CACHE_DIR does (the test
suite keeps its own per session). Stdlib only."""
from __future__ import annotations

import os
from pathlib import Path

ROOT_ENV = "OPMATRIX_CACHE_DIR"


def folder(name: str) -> Path:
    """<root>/<name>: the part of the host's kept things that `name` is."""
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV]) / name
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "opmatrix" / name
