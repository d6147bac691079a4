"""A crashed job can never be recorded with another job's numbers: each job's scratch folder is named by its full
key and emptied before it starts, and a result file is accepted only from the worker attempt that wrote it."""
import json

from opmatrix import plan as plan_mod
from opmatrix.core.result import Result
from opmatrix.incell.cell_runner import run_cell
from opmatrix.incell.result_file import read_result, write_result
from opmatrix.matrix import load_matrix
from tests.helpers import probe_adapter, probe_matrix, write_plugins
import pytest

pytestmark = pytest.mark.integration

# Correct on `small`; killed during build on `quick` (before it could write anything).
CRASHY = ("import os\n\ndef build(w, dtype, device, variant):\n"
          "    if w['n'] == 256:\n        os._exit(9)\n"
          "    return lambda x, out: out.copy_(x * 2)\n")


def test_a_result_file_from_another_attempt_is_not_accepted(tmp_path):
    path = tmp_path / "result.json"
    write_result(path, "attempt-1", Result(status="ok", median_ms=1.0))
    assert read_result(path, "attempt-1").median_ms == 1.0
    assert read_result(path, "attempt-2") is None
    path.write_text(json.dumps({"attempt": "attempt-2", "result": {"status": 5}}))
    assert read_result(path, "attempt-2") is None  # a damaged row is no result either


def test_job_folders_are_per_key_and_a_crash_is_never_another_jobs_ok(tmp_path):
    write_plugins(tmp_path, "probe", {"crashy": CRASHY}, probe_adapter("wallclock"))
    probe_matrix(tmp_path, "scratch", ["crashy"], ["small", "quick"], timeout_s=30, rep_ms=5)
    (plan,) = plan_mod.cell_plans(load_matrix(tmp_path / "m.toml"), "scratch-run", tmp_path / "scratch")
    for _ in range(2):  # the second pass runs over the first pass's folders
        rows = {r.workload: r for r in run_cell(plan)}
        assert rows["small"].status == "ok" and rows["small"].shape == "n=4096"
        crashed = rows["quick"]
        assert crashed.status == "crashed" and crashed.phase == "build", (crashed.status, crashed.error)
        assert crashed.median_ms is None and crashed.shape == "" and crashed.rel_err is None
    folders = sorted(p.name for p in (tmp_path / "scratch" / "scratch-run" / "cpu.host" / "jobs").iterdir())
    assert len(folders) == 2 and all("crashy" in f for f in folders)
    assert any("small" in f for f in folders) and any("quick" in f for f in folders)
