"""A crashed job can never be recorded with another job's numbers, nor with numbers of its own making: each job's
scratch folder is named by its full key and emptied before it starts, and a row is made by the judge in the cell
runner, never read from anything a worker wrote."""
import json

from opmatrix import plan as plan_mod
from opmatrix.incell.cell_runner import RESULT_PREFIX, run_cell
from opmatrix.matrix import load_matrix
from tests.helpers import probe_adapter, probe_matrix, write_plugins
import pytest

pytestmark = pytest.mark.integration

# Correct on `small`; killed during build on `quick` (before it could write anything).
CRASHY = ("import os\n\ndef build(w, dtype, device, variant):\n"
          "    if w['n'] == 256:\n        os._exit(9)\n"
          "    return lambda x, out: out.copy_(x * 2)\n")


# Builds, then forges its own row every way a worker could reach one: a result file in its folder, a result line
# on its output, a message on its channel claiming a finished row; then dies.
FORGER = """
import json, os, sys
from pathlib import Path

def build(w, dtype, device, variant):
    row = {"status": "ok", "median_ms": 0.001, "phase": "done"}
    Path(__file__).with_name("result.json").write_text(json.dumps({"attempt": "any", "result": row}))
    print(PREFIX + json.dumps(row), flush=True)
    os._exit(0)
"""


def test_a_worker_cannot_write_its_own_row(tmp_path):
    write_plugins(tmp_path, "probe", {"forger": FORGER.replace("PREFIX", repr(RESULT_PREFIX))},
                  probe_adapter("wallclock"))
    probe_matrix(tmp_path, "forged", ["forger"], ["quick"], timeout_s=30, rep_ms=5)
    (plan,) = plan_mod.cell_plans(load_matrix(tmp_path / "m.toml"), "forged-run", tmp_path / "scratch")
    (row,) = run_cell(plan)
    assert row.status == "crashed" and row.phase == "build" and row.median_ms is None, (row.status, row.error)
    assert RESULT_PREFIX in row.stderr_tail  # what it printed went to its own log, not to the cell's rows
    assert json.loads(row.to_json())["status"] == "crashed"


def test_job_folders_are_per_key_and_a_crash_is_never_another_jobs_ok(tmp_path):
    write_plugins(tmp_path, "probe", {"crashy": CRASHY}, probe_adapter("wallclock"))
    probe_matrix(tmp_path, "scratch", ["crashy"], ["small", "quick"], timeout_s=30, rep_ms=5)
    (plan,) = plan_mod.cell_plans(load_matrix(tmp_path / "m.toml"), "scratch-run", tmp_path / "scratch")
    for _ in range(2):  # the second pass runs over the first pass's folders
        rows = {r.workload: r for r in run_cell(plan)}
        assert rows["small"].status == "ok" and rows["small"].shape == "n=4096"
        crashed = rows["quick"]
        assert crashed.status == "crashed" and crashed.phase == "build", (crashed.status, crashed.error)
        assert crashed.median_ms is None and crashed.shape == "n=256" and crashed.rel_err is None
    folders = sorted(p.name for p in (tmp_path / "scratch" / "scratch-run" / "cpu.host" / "jobs").iterdir())
    assert len(folders) == 2 and all("crashy" in f for f in folders)
    assert any("small" in f for f in folders) and any("quick" in f for f in folders)
