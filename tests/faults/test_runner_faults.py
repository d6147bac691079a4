"""A cell runner killed mid-run (issue 29, item 6). After the runner has said it started and is building a group,
`kill -9` of it used to make every unfinished row `env_error` in phase `environment` ("the environment could not be
built"), which a plain --resume never retries. Now those rows are `lost`, with the phase their group had reached
(build, timing; none for a group not begun), and a plain --resume completes the run. On the embedded-Ray path and
--no-ray."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.faults import plugins
from tests.faults.harness import key, left_behind, opmatrix, processes_of, rows, wait_for
from tests.faults.runs import Run, planned


def runner_pid(scratch: str) -> int | None:
    """The cell runner of this run: the process started as `-m opmatrix.incell.cell_runner <scratch>/.../plan.json`."""
    for pid in processes_of(scratch):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"opmatrix.incell.cell_runner" in argv and any(scratch.encode() in a for a in argv):
            return pid
    return None


@pytest.mark.parametrize("ray", [False, True], ids=["no-ray", "embedded-ray"])
def test_a_runner_killed_mid_build_leaves_lost_rows_that_resume_runs(tmp_path, run_id, ray, observe):
    gate = tmp_path / "gate"
    matrix = plugins.plain_matrix(tmp_path, gate=gate)
    reports = tmp_path / "reports"
    run = Run(matrix, reports, run_id, ray=ray)
    jobs = Path(run.scratch) / "cpu.host" / "jobs"
    wait_for(lambda: any(p.read_text() == "build" for p in jobs.glob("*/phase")), 240, "a build to start", run.proc)
    pid = wait_for(lambda: runner_pid(run.scratch), 30, "the cell runner's pid", run.proc)
    os.kill(pid, signal.SIGKILL)
    code = run.wait(120)
    leftovers = left_behind(run.scratch)
    stored = rows(run.folder)
    gate.touch()
    # --resume is the same whichever scheduler stored the rows: it runs once, after the --no-ray case
    resumed = None if ray else opmatrix("run", matrix, "--no-ray", "--run-id", run_id, "--reports", reports,
                                        "--resume", "--fail-on", "lost,env_error,crashed")
    final = {key(r): r for r in rows(run.folder)}  # the last row of a key counts
    seen = sorted((r["workload"], r["status"], r["phase"]) for r in stored)
    print(f"runner {pid} killed: exit {code}; rows {seen}; resume exit {resumed and resumed.returncode}; "
          f"final {sorted((k[2], r['status']) for k, r in final.items())}")
    observe(f"cell runner killed mid-build ({'Ray' if ray else 'no Ray'})",
            "lost/build" + ("" if ray else ", resumable"),
            ",".join(sorted({f"{r['status']}/{r['phase'] or '-'}" for r in stored if r["workload"] == "w0"}))
            + ("" if resumed is None else ", resumable" if resumed.returncode == 0
               else f", resume exit {resumed.returncode}"),
            lost=len(planned() - set(final)), left_behind=len(leftovers))

    assert code == 1, run.stderr[-3000:]  # lost rows are failures (--fail-on), not a crash of opmatrix
    assert "Traceback" not in run.stderr
    assert {key(r) for r in stored} == planned()  # every job accounted for
    assert {r["status"] for r in stored} == {"lost"}, seen
    building = {r["workload"]: r["phase"] for r in stored}
    assert building["w0"] == "build" and building["w1"] == building["w2"] == "", seen
    assert all("the cell runner ended" in r["error"] and "--resume runs it again" in r["error"] for r in stored)
    assert leftovers == []
    if resumed is not None:
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert set(final) == planned() and {r["status"] for r in final.values()} == {"ok"}
