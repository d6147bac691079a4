"""Faults of the whole run, part one: SIGINT and SIGTERM of `opmatrix run`, after its first row and before it (part
two, SIGKILL and two runs on one run id: test_run_kill_faults.py; two files so that `--dist loadfile` runs them
side by side).

The matrix is a small CPU torch kernel (tests/faults/plugins.py PLAIN_SPEC) in the host toolchain; each of its
three workloads sleeps a different time per call, so every row's shape and timings say which job made it. Each run is a real CLI subprocess (`python -m opmatrix run
--no-ray`), signalled once its first row is on disk, while later jobs are still running.
"""
from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.faults import plugins
from tests.faults.harness import key, left_behind, opmatrix, rows, wait_for
from tests.faults.runs import Run, check_row_is_its_own_job, planned


@pytest.fixture
def matrix(tmp_path):
    return plugins.plain_matrix(tmp_path)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_stops_the_run_in_order_and_resume_completes_it(matrix, tmp_path, run_id, sig, observe):
    reports = tmp_path / "reports"
    run = Run(matrix, reports, run_id)
    seen = run.first_rows()
    run.proc.send_signal(sig)
    code = run.wait()
    leftovers = left_behind(run.scratch)
    stored = rows(run.folder)
    manifest = json.loads((run.folder / "run.json").read_text())
    interrupted = manifest["sessions"][-1]["interrupted"]
    missing = planned() - {key(r) for r in stored}

    resumed = opmatrix("run", matrix, "--no-ray", "--run-id", run_id, "--reports", reports, "--resume")
    final = rows(run.folder)
    lost = len({key(r) for r in seen} - {key(r) for r in stored}) + len(planned() - {key(r) for r in final})
    observe(f"{sig.name} of the whole run", f"exit {128 + sig}, {sig.name}", f"exit {code}, {interrupted or '-'}",
            lost=lost, left_behind=len(leftovers))

    assert code == 128 + sig, run.stderr
    assert "Traceback" not in run.stderr
    assert f"interrupted by {sig.name}; continue with --resume" in run.stderr
    assert interrupted == sig.name and manifest["sessions"][-1]["finished_at"]
    assert (run.folder / "report.md").is_file() and (run.folder / "results.parquet").is_file()
    assert leftovers == [], f"processes of the run still alive: {leftovers}"
    assert stored[:len(seen)] == seen  # what was on disk before the signal is still there, unchanged
    assert missing, "the signal came after the last job: nothing was interrupted"

    assert resumed.returncode == 0, resumed.stderr[-3000:]
    sessions = json.loads((run.folder / "run.json").read_text())["sessions"]
    assert [s["jobs"] for s in sessions] == [3, len(missing)] and sessions[-1]["interrupted"] == ""
    assert final[:len(stored)] == stored  # the first session's rows untouched
    assert {key(r) for r in final[len(stored):]} == missing  # exactly the missing jobs ran
    assert len(final) == 3 and {r["status"] for r in final} == {"ok"}
    for row in final:
        check_row_is_its_own_job(row)


def test_a_run_stopped_before_its_first_row_resumes_from_nothing(tmp_path, run_id, observe):
    """SIGTERM while the first job is still building (no row yet): the folder holds only run.json, and --resume
    must accept it and run every job."""
    gate = tmp_path / "gate"
    matrix = plugins.plain_matrix(tmp_path, gate=gate)
    reports = tmp_path / "reports"
    run = Run(matrix, reports, run_id)
    jobs = Path(run.scratch) / "cpu.host" / "jobs"
    wait_for(lambda: any(p.read_text() == "build" for p in jobs.glob("*/phase")), 180, "the first job to build",
             run.proc)
    run.proc.send_signal(signal.SIGTERM)
    code = run.wait()
    leftovers = left_behind(run.scratch)
    gate.touch()
    resumed = opmatrix("run", matrix, "--no-ray", "--run-id", run_id, "--reports", reports, "--resume")
    final = rows(run.folder)
    observe("SIGTERM before the first row", "exit 143, resumable",
            f"exit {code}, " + ("resumable" if resumed.returncode == 0 else f"resume exit {resumed.returncode}"),
            lost=len(planned() - {key(r) for r in final}), left_behind=len(leftovers))

    assert code == 128 + signal.SIGTERM and "Traceback" not in run.stderr, run.stderr
    assert leftovers == []
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert sorted(key(r) for r in final) == sorted(planned()) and {r["status"] for r in final} == {"ok"}
    sessions = json.loads((run.folder / "run.json").read_text())["sessions"]
    assert [(s["jobs"], s["interrupted"]) for s in sessions] == [(3, "SIGTERM"), (3, "")]

