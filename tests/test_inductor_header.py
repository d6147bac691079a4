"""torch.compile's precompiled C++ header is built once per host, before any job's timed build
(opmatrix.kit.inductor_header): two fresh processes, each a job with a temp folder of its own, prepare and then
compile a CPU kernel with real torch; the header is built in the host's folder at most once, and the header each
job's build used is the host's (a hard link to it), never one the job built inside its timing."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opmatrix.incell import host_cache
from opmatrix.kit import inductor_header

JOB = """
import json, torch
from opmatrix.kit import inductor_header, inductor_isa
inductor_isa.detect()
linked = inductor_header.prepare()
f = torch.compile(lambda x, w: torch.nn.functional.silu(x) * w + 1, dynamic=False)
x, w = torch.randn(300, 689), torch.randn(689)
assert torch.allclose(f(x, w), torch.nn.functional.silu(x) * w + 1, atol=1e-5)
print(json.dumps([str(p) for p in linked]))
"""


def _job(folder: Path) -> list[str]:
    (folder / "tmp").mkdir(parents=True)
    env = dict(os.environ, TMPDIR=str(folder / "tmp"), TORCHINDUCTOR_CACHE_DIR=str(folder / "inductor"))
    out = subprocess.run([sys.executable, "-c", JOB], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _headers(folder: Path) -> dict[str, tuple[int, int]]:
    """The precompiled headers (.gch) under `folder`: (inode, modification time) by path."""
    return {str(p): (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.rglob("precompiled_headers/*.gch")}


@pytest.mark.integration  # real torch and g++ in fresh processes
def test_the_precompiled_header_is_built_once_per_host_and_linked_into_each_jobs_folder(tmp_path):
    host = host_cache.folder(inductor_header.FOLDER)
    first = _job(tmp_path / "job-1")
    kept = _headers(host)
    assert first and kept, (first, kept)
    second = _job(tmp_path / "job-2")
    assert _headers(host) == kept  # not built again
    host_inodes = {inode for inode, _ in kept.values()}
    for job, linked in (("job-1", first), ("job-2", second)):
        built_by_job = _headers(tmp_path / job)
        assert built_by_job and set(built_by_job) >= set(linked), (job, built_by_job, linked)
        # every header the job's folder holds is the host's: its build found the one it hashes to, built none
        assert {inode for inode, _ in built_by_job.values()} <= host_inodes, (job, built_by_job, kept)


def test_a_host_folder_that_cannot_be_made_leaves_the_header_to_the_job(tmp_path, monkeypatch):
    """A cache root that is a file: nothing is linked, no error; the job's build precompiles its own header."""
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(host_cache.ROOT_ENV, str(tmp_path / "file"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "job-tmp"))
    assert inductor_header.prepare() == []
    assert not (tmp_path / "job-tmp").exists()
