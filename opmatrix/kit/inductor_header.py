"""Inductor's precompiled header for CPU kernels, built once per host before any job's timed build.

Inductor compiles every CPU kernel against torch's C++ prefix header (torch/csrc/inductor/cpp_prefix.h), which it
first precompiles (a .gch of about 150 MB) into <temp folder>/torchinductor_<user>/precompiled_headers, a folder it
keeps machine-wide on purpose, outside the folder a fresh cache empties: the header depends only on the compiler,
its flags and torch's headers, never on the kernel. A job's cold build gives inductor a temp folder of its own, so
every torch.compile job on a CPU precompiled that header again inside its timed build, about two thirds of a small
kernel's build. Left machine-wide it would instead be built by whichever job came first, inside that job's timing.

So the torch-compile adapter calls `prepare` before the job's build: the host keeps the headers under its cache
folder (<user cache>/opmatrix/inductor-header/<key>/, the key naming torch and the C++ compiler), built there once
by compiling a small vectorised kernel in a process of its own (this process learns nothing from it), and linked
into the job's own header folder, where inductor finds the header its command line hashes to and skips that build.
The job's build still preprocesses the header (how inductor computes that hash) and builds the kernel into an empty
cache. A kernel built with other flags (one inductor does not vectorise) misses the kept header and builds its own,
as every build did before. Stdlib only at import.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from opmatrix.incell import host_cache

FOLDER = "inductor-header"
HEADERS = "precompiled_headers"  # inductor's folder name under its machine-wide cache folder
FAILED = "build-failed.txt"  # why the host's build made no header: not tried again until the folder is deleted
BUILD_TIMEOUT_S = 300  # the build takes about 15 s of one core; the other jobs of the host wait for it
# A vectorised pointwise kernel: inductor precompiles the header with the same flags as for the jobs' kernels.
WARM_UP = """
import torch
from opmatrix.kit import inductor_isa
inductor_isa.detect()
torch.compile(lambda x: x * 2.0 + 1.0, dynamic=False)(torch.randn(256))
"""


def prepare() -> list[Path]:
    """Link the host's precompiled headers into this process's inductor header folder (the job's, from its
    TMPDIR), building them first if the host has none for this torch and compiler. Returns the linked .gch files;
    [] where inductor precompiles no header, or the host folder cannot be made or built (then the job's build
    precompiles its own, as before, with no error)."""
    try:
        from torch._inductor import config
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:
        return []
    if not getattr(config, "cpp_cache_precompile_headers", False):
        return []
    key = _key()
    if key is None:
        return []
    host = host_cache.folder(FOLDER) / key
    try:
        host.mkdir(parents=True, exist_ok=True)
        with open(host.parent / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one build per host; the others wait, then link
            kept = _kept(host)
            if not kept and not (host / FAILED).is_file():
                _build(host)
                kept = _kept(host)
    except OSError:
        return []
    return _link(kept, Path(default_cache_dir()) / HEADERS) if kept else []


def _key() -> str | None:
    """Which torch (version and where it is installed) and which C++ compiler (its --version): what the kept
    headers were built with, so another toolchain on the host keeps headers of its own."""
    try:
        import torch
        from torch._inductor.cpp_builder import get_cpp_compiler
        compiler = get_cpp_compiler()
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60).stdout
    except Exception:  # noqa: BLE001 - whatever the compiler lookup raises: no kept header, the job builds its own
        return None
    facts = "\n".join([torch.__version__, os.path.dirname(torch.__file__), compiler, version])
    return hashlib.sha256(facts.encode()).hexdigest()[:16]


def _kept(host: Path) -> list[Path]:
    """The built headers (.gch) under the host's folder, each beside the .h inductor includes it by."""
    return sorted(g for g in host.glob(f"*/{HEADERS}/*.gch") if g.with_suffix("").is_file())


def _build(host: Path) -> None:
    """Compile the small kernel in a process whose temp folder is the host's: inductor precompiles the header
    there. A build that makes no header leaves why in the host's folder (FAILED), and the jobs precompile their
    own, as before."""
    env = dict(os.environ, TMPDIR=str(host))  # the job's own: its torch, and opmatrix on the cell's PYTHONPATH
    with tempfile.TemporaryDirectory(prefix="opmatrix-inductor-header-") as scratch:
        env["TORCHINDUCTOR_CACHE_DIR"] = scratch
        try:
            out = subprocess.run([sys.executable, "-c", WARM_UP], env=env, capture_output=True, text=True,
                                 timeout=BUILD_TIMEOUT_S)
            why = f"exit {out.returncode}\n{out.stderr[-4000:]}"
        except (OSError, subprocess.SubprocessError) as exc:
            why = f"{type(exc).__name__}: {exc}"
    if not _kept(host):
        (host / FAILED).write_text(f"no precompiled header was made by the build in {host}: {why}\n")


def _link(kept: list[Path], headers: Path) -> list[Path]:
    """Each kept header and its .gch into `headers` (hard links, else copies): inductor skips building a .gch that
    exists."""
    linked = []
    try:
        headers.mkdir(parents=True, exist_ok=True)
        for gch in kept:
            for source in (gch.with_suffix(""), gch):
                target = headers / source.name
                if not target.exists():
                    try:
                        os.link(source, target)
                    except OSError:
                        shutil.copy2(source, target)
            linked.append(headers / gch.name)
    except OSError:
        return linked
    return linked
