"""A process that leaves its worker's process group (issue 29, item 2): a build that starts `setsid sleep 600`
left it running after opmatrix exited (parent init, a session of its own), unseen. The cell runner is now a child
subreaper: such a process becomes its child once its worker ends, is killed with its group, and is named on the
job's row (`left_running`). On the embedded-Ray path and --no-ray; one workload (its job and the baseline's A/A
twin each start one)."""
from __future__ import annotations

import pytest

from tests.faults import plugins
from tests.faults.harness import left_behind, rows
from tests.faults.runs import Run


@pytest.mark.parametrize("ray", [False, True], ids=["no-ray", "embedded-ray"])
def test_a_process_that_leaves_the_group_is_killed_and_named_on_the_row(tmp_path, run_id, ray, observe):
    matrix = plugins.plain_matrix(tmp_path, escape=True, workloads=("w0",))
    reports = tmp_path / "reports"
    run = Run(matrix, reports, run_id, "--fail-on", "lost,env_error,crashed", ray=ray)
    code = run.wait(180)
    leftovers = left_behind(run.scratch, within_s=2)
    stored = rows(run.folder)
    named = [p for r in stored for p in r.get("left_running", [])]
    print(f"exit {code}; rows {[(r['workload'], r['status']) for r in stored]}; left_running {named}; "
          f"still alive {leftovers}")
    observe(f"setsid process started by a build ({'Ray' if ray else 'no Ray'})", "killed, named on the row",
            ("killed" if not leftovers else f"{len(leftovers)} alive") + (", named on the row" if named else
                                                                          ", not named"),
            left_behind=len(leftovers))

    assert code == 0, run.stderr[-3000:]
    assert leftovers == [], f"processes of the run still alive: {leftovers}"
    assert [r["status"] for r in stored] == ["ok"]
    assert len(named) == 1 and "sleep 600" in named[0], named  # the job's own; the twin's is in the cell's log
