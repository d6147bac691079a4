"""Inductor's vector-ISA detection on a CPU, kept per host instead of paid by every cold build.

Before torch.compile builds its first C++ kernel in a process, inductor learns which vector ISAs (AVX2, AVX-512,
AMX, ...) it may generate code for: it compiles a small program against torch's vector headers for each ISA the
CPU reports, and loads it, into its cache folder. A job compiles into an empty cache folder of its own (cold
builds), so every torch.compile job on a CPU paid that probe of the host again, more than its kernel's own build
(about 17 s of the 28 s a cold CPU build took on the 2-core CI machine). What it finds is a fact of the host, the
compiler and the torch build, and inductor keys those programs by exactly these (compiler version, ISA flags, torch
version), as it does in its own default folder on a user's machine, where the probe is paid once. So the torch-compile
adapter runs the detection before the job's build with inductor pointed at one folder per host under the user's
cache (<user cache>/opmatrix/inductor-isa): inductor remembers the answer for the rest of the process, and the job's
build, timed into its own empty folder, is the kernel's. Stdlib only at import.
"""
from __future__ import annotations

from opmatrix.incell import host_cache
from opmatrix.kit import scoped_env

FOLDER = "inductor-isa"
CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"


def detect() -> list[str]:
    """The vector ISAs inductor will use in this process, detected with its test programs kept in the host's
    folder (built there once, then only loaded). Inductor keeps the answer in memory, so this process's builds
    never probe again. Where the host's folder cannot be made, or inductor has no such detection, it returns []
    and the job's build probes in its own folder, as it did before."""
    where = host_cache.folder(FOLDER)
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError:
        return []
    try:
        from torch._inductor import cpu_vec_isa
    except ImportError:
        return []
    if not hasattr(cpu_vec_isa, "valid_vec_isa_list"):
        return []
    with scoped_env.variable(CACHE_ENV, str(where)):
        return [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]
