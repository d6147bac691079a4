"""What a run leaves behind once it has ended (issue 29, items 2 and 9), from one run per scheduler (embedded Ray,
--no-ray) of a matrix whose builds misbehave: every build writes 3 MiB of output and starts `setsid sleep 600` (a
process in a session of its own, which outlives the worker's process group), and the w1 build then raises.

- Escaped processes: the cell runner is a child subreaper, so such a process becomes its child when its worker
  ends; it is killed with its group and named on the job's row (`left_running`); nothing is left running.
- Scratch: pruned after the session by the policy of opmatrix.cellenv.scratch: a job whose row did not fail loses
  its folder, a failed job keeps its folder with every file cut to its last 1 MiB (its row already carries the last
  4,000 characters), and the run says how much it freed.
"""
from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from opmatrix.cellenv.scratch import KEEP_BYTES
from opmatrix.core import status
from tests.faults import plugins
from tests.faults.harness import left_behind, rows, unique_run_id
from tests.faults.runs import Run

NOISE = 3 * 1024 * 1024
MISBEHAVING = plugins.impl("time.sleep(w['ms'] / 1e3)\nout.copy_(x * 2)", prelude="import subprocess, sys, time",
                           setup=f"""
    subprocess.Popen(["setsid", "sleep", "600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    for _ in range({NOISE // 1024}):
        sys.stdout.write("x" * 1023 + "\\n")
    sys.stdout.write("LAST LINE OF THE BUILD\\n")
    sys.stdout.flush()
    if w["n"] == 32:
        raise RuntimeError("injected build failure after 3 MiB of output")
""")


@dataclass
class Ended:
    run: Run
    code: int
    leftovers: list[int]
    stored: dict  # workload -> row
    out: str


@pytest.fixture(scope="module", params=[False, True], ids=["no-ray", "embedded-ray"])
def ended(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("end")
    plugins.write_tree(root, {"plain": (plugins.PLAIN_SPEC, {"torch": MISBEHAVING})},
                       {"torch": plugins.adapter("wallclock")})
    (root / "m.toml").write_text(textwrap.dedent(plugins.PLAIN_MATRIX).replace('["w0", "w1", "w2"]', '["w0", "w1"]'))
    run = Run(root / "m.toml", root / "reports", unique_run_id("end"), "--fail-on", "lost,env_error,crashed",
              ray=request.param)
    code = run.wait(300)
    yield Ended(run, code, left_behind(run.scratch, within_s=2), {r["workload"]: r for r in rows(run.folder)},
                run.out_path.read_text())
    import shutil

    shutil.rmtree(run.scratch, ignore_errors=True)


def where(e: Ended) -> str:
    return "Ray" if "--no-ray" not in e.run.proc.args else "no Ray"


def test_a_process_that_leaves_the_group_is_killed_and_named_on_the_row(ended, observe):
    named = {w: r.get("left_running", []) for w, r in ended.stored.items()}
    print(f"exit {ended.code}; rows {[(w, r['status']) for w, r in ended.stored.items()]}; left_running {named}; "
          f"still alive {ended.leftovers}")
    observe(f"setsid process started by a build ({where(ended)})", "killed, named on the row",
            ("killed" if not ended.leftovers else f"{len(ended.leftovers)} alive")
            + (", named on the row" if all(named.values()) else ", not named"), left_behind=len(ended.leftovers))
    assert ended.code == 0, ended.run.stderr[-3000:]
    assert ended.leftovers == [], f"processes of the run still alive: {ended.leftovers}"
    assert set(ended.stored) == {"w0", "w1"} and ended.stored["w1"]["status"] == status.COMPILE_ERROR
    for w, found in named.items():  # each job's own; the A/A twin's is named in the cell's nox.log
        assert len(found) == 1 and "sleep 600" in found[0], (w, found)


def test_scratch_is_pruned_by_the_policy_and_the_run_says_how_much(ended, observe):
    jobs = Path(ended.run.scratch) / "cpu.host" / "jobs"
    folders = sorted(p.name for p in jobs.iterdir()) if jobs.is_dir() else []
    logs = {p.parent.name: p.stat().st_size for p in jobs.glob("*/worker.log")}
    said = re.search(r"scratch .*: freed ([0-9.]+) MiB", ended.out)
    failed = {w for w, r in ended.stored.items() if r["status"] in status.FAILED}
    print(f"job folders left {folders}; worker.log sizes {logs}; failed rows {failed}; said: {said and said[0]}")
    observe(f"3 MiB build logs in the scratch ({where(ended)})", "pruned, freed said",
            ("pruned" if folders and all(s <= KEEP_BYTES for s in logs.values()) else "not pruned")
            + (", freed said" if said else ", not said"))
    assert "LAST LINE OF THE BUILD" in ended.stored["w1"]["stderr_tail"]
    assert {re.match(r"plain-(w\d)-", name)[1] for name in folders} == failed, (folders, failed)  # w1, unless noise
    assert logs and all(s <= KEEP_BYTES for s in logs.values()), logs
    kept = (jobs / next(n for n in folders if "-w1-" in n and "twin" not in n) / "worker.log").read_text()
    assert kept.endswith("LAST LINE OF THE BUILD\n")  # the end of the log is what is kept
    assert said and float(said[1]) >= 2 * NOISE / 2**20, ended.out[-2000:]  # at least w0's and its twin's 3 MiB
