"""What torch.compile learns and builds once per host, not in every cold build: the probe of the CPU's vector ISAs
(opmatrix.kit.inductor_isa) and the precompiled C++ header (opmatrix.kit.inductor_header). Two fresh processes, each
a job with a cold folder of its own, detect, prepare and compile a CPU kernel with real torch: the ISA test programs
are built once into the host's folder, only loaded the second time, and never land in a job's folder, which is
inductor's folder again afterwards; the header is built in the host's folder at most once, and the header each job's
build used is the host's (a hard link to it), never one the job built inside its timing. When the host's folder
cannot serve: tests/unit/test_inductor_per_host.py."""
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from opmatrix.incell import host_cache
from opmatrix.kit import inductor_header, inductor_isa

MARKER = "__avx_chk_kernel"  # the function of inductor's ISA test program (torch._inductor.cpu_vec_isa)
JOB = """
import json, os, torch
from opmatrix.kit import inductor_header, inductor_isa
isas = inductor_isa.detect()
after = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
linked = inductor_header.prepare()
f = torch.compile(lambda x, w: torch.nn.functional.silu(x) * w + 1, dynamic=False)
x, w = torch.randn(300, 689), torch.randn(689)
assert torch.allclose(f(x, w), torch.nn.functional.silu(x) * w + 1, atol=1e-5)
print(json.dumps({"isas": isas, "after": after, "linked": [str(p) for p in linked]}))
"""


def _x86_vector_cpu() -> bool:
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    return " avx2 " in Path("/proc/cpuinfo").read_text().replace("\n", " ")


def _job(folder: Path) -> dict:
    """One job's worker as the cell runner starts it: inductor's cache and the temp folder are the job's own."""
    (folder / "tmp").mkdir(parents=True)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(folder / "inductor"), TMPDIR=str(folder / "tmp"))
    out = subprocess.run([sys.executable, "-c", JOB], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _programs(folder: Path) -> dict[str, int]:
    """Inductor's ISA test programs under `folder`, built (.so) or written (.cpp), with their modification times."""
    found = {}
    for path in folder.rglob("*"):
        if path.suffix == ".cpp" and MARKER in path.read_text(errors="replace"):
            found[str(path)] = path.stat().st_mtime_ns
            for built in path.parent.glob(path.stem + "*.so"):
                found[str(built)] = built.stat().st_mtime_ns
    return found


def _headers(folder: Path) -> dict[str, tuple[int, int]]:
    """The precompiled headers (.gch) under `folder`: (inode, modification time) by path."""
    return {str(p): (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.rglob("precompiled_headers/*.gch")}


@pytest.mark.integration  # real torch and g++ in two fresh processes
@pytest.mark.skipif(not _x86_vector_cpu(), reason="inductor probes vector ISAs this way on x86 CPUs with AVX2")
def test_the_isa_programs_and_the_header_are_built_once_per_host_and_never_in_a_jobs_timed_build(tmp_path):
    isa_host, header_host = host_cache.folder(inductor_isa.FOLDER), host_cache.folder(inductor_header.FOLDER)
    first = _job(tmp_path / "job-1")
    assert first["isas"] and first["after"] == str(tmp_path / "job-1" / "inductor")  # the job's folder again
    programs, headers = _programs(isa_host), _headers(header_host)
    assert any(p.endswith(".so") for p in programs), sorted(programs)
    assert first["linked"] and headers, (first, headers)
    second = _job(tmp_path / "job-2")
    assert second["isas"] == first["isas"]
    assert _programs(isa_host) == programs and _headers(header_host) == headers  # loaded and linked, not built
    host_inodes = {inode for inode, _ in headers.values()}
    for job, answer in (("job-1", first), ("job-2", second)):
        assert not _programs(tmp_path / job)  # a cold build's folder holds the kernel's build only
        in_job = _headers(tmp_path / job)
        assert in_job and set(in_job) >= set(answer["linked"]), (job, in_job, answer)
        # every header in the job's folder is the host's: its build found the one it hashes to and built none
        assert {inode for inode, _ in in_job.values()} <= host_inodes, (job, in_job, headers)
