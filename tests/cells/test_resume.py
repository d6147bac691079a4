"""A run stopped at its deadline keeps what it finished and is continued with --resume: only the jobs without a
row run again, in the same run folder, through the real nox cell environment."""
import json
import time

import pandas as pd
import pytest

from opmatrix.run import RunExists, run
from opmatrix.scheduling.local import LocalScheduler
from tests.helpers import probe_adapter, probe_matrix, write_plugins

pytestmark = pytest.mark.integration

DEADLINE_S = 30  # room for the cell environment and its first job to start on a loaded 2-core machine
# The first job's build waits until just past the run's deadline (an absolute time, written in when the test
# starts): it finishes, and the second job is never started.
SLEEPY = ("import time\n\ndef build(w, dtype, device, variant):\n"
          "    if w['n'] == 256:\n"
          "        time.sleep(max(0.0, {past_deadline} - time.time()))\n"
          "    return lambda x, out: out.copy_(x * 2)\n")


def test_deadline_then_resume_runs_only_what_is_left(tmp_path):
    past_deadline = time.time() + DEADLINE_S + 3  # run() starts its clock a moment after this
    write_plugins(tmp_path, "probe", {"sleepy": SLEEPY.format(past_deadline=past_deadline)},
                  probe_adapter("wallclock"))
    matrix = probe_matrix(tmp_path, "resume", ["sleepy"], ["quick", "small"], timeout_s=120, rep_ms=5)
    reports, scratch = tmp_path / "reports", tmp_path / "scratch"
    folder = run(matrix, reports, "r1", scratch_root=scratch, scheduler=LocalScheduler(), deadline_s=DEADLINE_S)
    first = pd.read_parquet(folder / "results.parquet")
    assert list(first.workload) == ["quick"] and list(first.status) == ["ok"]
    assert "1 of 2 planned jobs have no result yet" in (folder / "report.md").read_text()

    with pytest.raises(RunExists, match="--resume"):
        run(matrix, reports, "r1", scratch_root=scratch, scheduler=LocalScheduler())

    impl = tmp_path / "kernels" / "probe" / "sleepy.py"
    impl.write_text(impl.read_text() + "# edited between the sessions\n")  # the resumed rows run other code
    run(matrix, reports, "r1", scratch_root=scratch, scheduler=LocalScheduler(), resume=True)
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    assert [r["workload"] for r in rows] == ["quick", "small"]  # the finished job was not run again
    final = pd.read_parquet(folder / "results.parquet")
    assert set(final.status) == {"ok"} and len(final) == 2
    manifest = json.loads((folder / "run.json").read_text())
    assert [s["jobs"] for s in manifest["sessions"]] == [2, 1]
    assert [s["sources_changed"] for s in manifest["sessions"]] == [[], ["probe/sleepy"]]
    assert len(manifest["sources"]["probe/sleepy"]) == 16  # the digest of the latest session's sources
    report = (folder / "report.md").read_text()
    assert "run in 2 sessions" in report and "planned jobs have no result" not in report
