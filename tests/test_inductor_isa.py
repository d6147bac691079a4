"""torch.compile's probe of the CPU's vector ISAs is kept per host (opmatrix.kit.inductor_isa), not paid again by
every cold build: detected with real torch in two fresh processes, each with a cold job folder of its own, the
test programs are built once into the host's folder, only loaded the second time, and never land in a job's
folder; the job's folder is where inductor points again afterwards."""
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from opmatrix.incell import host_cache
from opmatrix.kit import inductor_isa, scoped_env

MARKER = "__avx_chk_kernel"  # the function of inductor's ISA test program (torch._inductor.cpu_vec_isa)
DETECT = """
import json, os
from opmatrix.kit import inductor_isa
isas = inductor_isa.detect()
print(json.dumps({"isas": isas, "after": os.environ.get("TORCHINDUCTOR_CACHE_DIR")}))
"""


def _x86_vector_cpu() -> bool:
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    return " avx2 " in Path("/proc/cpuinfo").read_text().replace("\n", " ")


def _detect(job_folder: Path) -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(job_folder))
    out = subprocess.run([sys.executable, "-c", DETECT], capture_output=True, text=True, env=env, timeout=300)
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


@pytest.mark.integration  # real torch in two fresh processes, and inductor's compilers
@pytest.mark.skipif(not _x86_vector_cpu(), reason="inductor probes vector ISAs this way on x86 CPUs with AVX2")
def test_the_vector_isa_programs_are_built_once_per_host_and_never_in_a_jobs_folder(tmp_path):
    host = host_cache.folder(inductor_isa.FOLDER)
    first = _detect(tmp_path / "job-1")
    assert first["isas"] and first["after"] == str(tmp_path / "job-1")  # the job's folder is inductor's again
    kept = _programs(host)
    assert any(p.endswith(".so") for p in kept), sorted(kept)
    second = _detect(tmp_path / "job-2")
    assert second["isas"] == first["isas"]
    assert _programs(host) == kept  # loaded, not built again
    for job in ("job-1", "job-2"):
        assert not _programs(tmp_path / job)  # a cold build's folder holds the kernel's build only


def test_a_host_folder_that_cannot_be_made_leaves_the_probe_to_the_job(tmp_path, monkeypatch):
    """A cache root that is a file (a read-only or odd home): nothing detected here, inductor's folder untouched,
    no error; the job's build probes in its own folder as before."""
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(host_cache.ROOT_ENV, str(tmp_path / "file"))
    monkeypatch.setenv(inductor_isa.CACHE_ENV, str(tmp_path / "job"))
    assert inductor_isa.detect() == []
    assert os.environ[inductor_isa.CACHE_ENV] == str(tmp_path / "job")


@pytest.mark.parametrize("before", [None, "the job's folder"])
def test_a_scoped_variable_is_put_back_as_it_was(monkeypatch, before):
    """kit.scoped_env.variable, which the probe and the TileLang helpers set their compilers' variables with: set
    within the block, then restored, or removed when it was unset, also when the block raises."""
    name = "OPMATRIX_TEST_SCOPED"
    if before is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, before)
    with pytest.raises(RuntimeError), scoped_env.variable(name, "inside"):
        assert os.environ[name] == "inside"
        raise RuntimeError
    assert os.environ.get(name) == before
