"""Runs cannot lose rows silently (issue 44 §7). A kernel that deletes results.jsonl while the run goes on: the
driver keeps its own record of every row it stored, writes the lost ones again, and the run exits 4 naming them.
`opmatrix report` refuses a run that still holds its lock, and never replaces a finished run's report with one made
from fewer rows. On --no-ray, as a user runs it."""
from __future__ import annotations

import json
import shutil

import pytest

from tests.faults import plugins
from tests.faults.harness import key, opmatrix, rows
from tests.faults.runs import Run, planned

pytestmark = pytest.mark.integration


def test_a_kernel_that_deletes_the_results_file_loses_no_row_and_the_run_says_so(tmp_path, run_id):
    reports = tmp_path / "reports"
    results = reports / run_id / "results.jsonl"
    matrix = plugins.plain_matrix(tmp_path)
    (tmp_path / "kernels" / "plain" / "torch.py").write_text(plugins.impl(  # w1 and w2 delete what is there
        "time.sleep(w['ms'] / 1e3)\nout.copy_(x * 2)", prelude="import pathlib, time",
        setup=f"if w['n'] != 16:\n    pathlib.Path({str(results)!r}).unlink(missing_ok=True)"))
    out = opmatrix("run", matrix, "--no-ray", "--run-id", run_id, "--reports", reports, timeout=240)
    assert out.returncode == 4, out.stderr[-3000:]
    assert "lost" in out.stderr and "restored from the driver's own record" in out.stderr, out.stderr[-3000:]
    assert "cpu.host plain w0 float32 torch" in out.stderr  # the rows lost are named
    assert {key(r) for r in rows(reports / run_id)} == planned()  # every row is back
    assert "Traceback" not in out.stderr


def test_report_refuses_a_run_that_is_still_writing(tmp_path, run_id):
    gate = tmp_path / "gate"
    matrix = plugins.plain_matrix(tmp_path, later_gate=gate)
    reports = tmp_path / "reports"
    run = Run(matrix, reports, run_id)
    try:
        run.first_rows()
        during = opmatrix("report", run_id, "--reports", reports)
        assert during.returncode == 2 and "is in use by opmatrix run" in during.stderr, during.stderr[-2000:]
        assert not (reports / run_id / "report.md").exists()  # nothing written from a run still going on
    finally:
        gate.touch()
    assert run.wait(240) == 0, run.stderr[-3000:]


def test_report_never_replaces_a_finished_runs_files_with_fewer_rows(tmp_path, run_id):
    matrix = plugins.plain_matrix(tmp_path, workloads=("w0", "w1"))
    reports = tmp_path / "reports"
    assert opmatrix("run", matrix, "--no-ray", "--run-id", run_id, "--reports", reports).returncode == 0
    folder = reports / run_id
    report, verdicts = (folder / "report.md").read_text(), (folder / "verdicts.json").read_text()
    assert json.loads((folder / "run.json").read_text())["reported_rows"] == 2
    kept = folder / "results.kept"
    shutil.copy(folder / "results.jsonl", kept)
    (folder / "results.jsonl").write_text((folder / "results.jsonl").read_text().splitlines(keepends=True)[0])
    fewer = opmatrix("report", run_id, "--reports", reports)
    assert fewer.returncode == 2 and "made from 2 rows" in fewer.stderr, fewer.stderr[-2000:]
    assert (folder / "report.md").read_text() == report and (folder / "verdicts.json").read_text() == verdicts
    shutil.copy(kept, folder / "results.jsonl")  # the rows back: it reports again
    assert opmatrix("report", run_id, "--reports", reports).returncode == 0


def test_a_run_whose_planned_jobs_have_no_row_and_no_deadline_exits_4(tmp_path):
    from opmatrix import plan as plan_mod
    from opmatrix.matrix import load_matrix
    from opmatrix.run import check_complete
    from opmatrix.store import ResultStore, RowsMissing

    matrix = plugins.plain_matrix(tmp_path)
    planned_plans = plan_mod.cell_plans(load_matrix(matrix), "partial", tmp_path / "scratch")
    store = ResultStore(tmp_path / "reports" / "partial")
    check_complete(store, planned_plans, [], deadline_s=60)  # a deadline the user set: no error
    with pytest.raises(RowsMissing, match=r"3 planned job\(s\) have no row and no deadline stopped them"):
        check_complete(store, planned_plans, [], deadline_s=None)
    assert RowsMissing.code == 4
