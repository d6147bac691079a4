"""Faults of the whole run, part two: SIGKILL of `opmatrix run`, and two runs on one run id (part one, SIGINT and
SIGTERM: test_run_faults.py).

The matrix is a small CPU torch kernel (tests/faults/plugins.py PLAIN_SPEC) in the host toolchain; each of its
three workloads sleeps a different time per call, so every row's shape and timings say which job made it. Each run
is a real CLI subprocess (`python -m opmatrix run --no-ray`).
"""
from __future__ import annotations

import json
import shutil
import signal

import pytest

from opmatrix import paths
from opmatrix.store import ResultStore
from tests.faults import plugins
from tests.faults.harness import key, left_behind, opmatrix, rows, unique_run_id, wait_for
from tests.faults.runs import Run, check_row_is_its_own_job, planned


def test_sigkill_leaves_nothing_behind_and_resume_redoes_the_crash(tmp_path, run_id, observe):
    """SIGKILL cannot be handled: the run's children must die with it (parent-death signals), and `--resume
    --redo crashed` must run again the job that crashed before the kill and every job that never reported."""
    matrix = plugins.plain_matrix(tmp_path, crash_once=tmp_path / "crashed-once")  # w0 segfaults in its first worker
    reports = tmp_path / "reports"
    run = Run(matrix, reports, run_id)
    seen = run.first_rows()
    run.proc.kill()
    code = run.wait()
    leftovers = left_behind(run.scratch)
    stored = rows(run.folder)
    # A kill can land in the middle of writing a row (a long row takes more than one write): leave half a row at
    # the end of the file, as such a kill would.
    half = json.dumps(stored[0])[:300]
    with open(run.folder / "results.jsonl", "a") as fh:
        fh.write(half)

    resumed = opmatrix("run", matrix, "--no-ray", "--run-id", run_id, "--reports", reports, "--resume",
                       "--redo", "crashed")
    loaded = ResultStore(run.folder, create=False).load()
    final = [json.loads(r.to_json()) for r in loaded.results]
    final_status = {key(r): r["status"] for r in final}  # the last row of a key is the one that counts
    lost = len({key(r) for r in seen} - {key(r) for r in stored}) + len(planned() - set(final_status))
    observe("SIGKILL of the whole run", "no leftovers, resumable", "no leftovers, resumable"
            if not leftovers and resumed.returncode == 0 else f"{len(leftovers)} left, exit {resumed.returncode}",
            lost=lost, left_behind=len(leftovers))

    assert code == -signal.SIGKILL
    assert leftovers == [], f"processes of the killed run still alive: {leftovers}"
    assert [(r["workload"], r["status"]) for r in seen] == [("w0", "crashed")]
    assert stored[:len(seen)] == seen
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Traceback" not in resumed.stderr
    # --resume moved the half row out (its job had no row and ran again): the store reads clean, report --strict
    # accepts it (before issue 29 the half row stayed one skipped line, and --strict refused the run forever)
    assert loaded.skipped == []
    assert (run.folder / "results.cut.txt").read_text() == half + "\n"
    assert "its last line was cut short by a crash" in resumed.stdout
    assert opmatrix("report", run.folder, "--strict").returncode == 0
    assert final[:len(stored)] == stored
    redone = final[len(stored):]
    never_reported = {k[2] for k in planned() - {key(r) for r in stored}}
    assert sorted(r["workload"] for r in redone) == sorted({"w0"} | never_reported)  # each of them once
    assert set(final_status.values()) == {"ok"}
    for row in final:
        check_row_is_its_own_job(row)


@pytest.fixture(scope="module")
def locked_run(tmp_path_factory):
    """A run, and a second run on the same run id (with and without --resume) started while the first holds the
    folder: the first run's builds wait at a gate until both were answered. Returns (first run, its exit code, the
    second runs' results, leftovers)."""
    root = tmp_path_factory.mktemp("lock")
    gate = root / "gate"
    matrix = plugins.plain_matrix(root, gate=gate)
    reports = root / "reports"
    run_id = unique_run_id("lock")
    first = Run(matrix, reports, run_id)
    lock, manifest = reports / run_id / ".lock", reports / run_id / "run.json"
    wait_for(lambda: manifest.is_file() and f"pid {first.proc.pid} " in lock.read_text(), 60,
             "the first run to hold its folder", first.proc)
    second = [opmatrix("run", matrix, "--no-ray", "--run-id", run_id, "--reports", reports, *extra)
              for extra in ((), ("--resume",))]
    gate.touch()
    code = first.wait()
    yield first, code, second, left_behind(first.scratch), matrix
    shutil.rmtree(paths.SCRATCH / run_id, ignore_errors=True)


def test_a_second_run_on_the_same_run_id_is_refused_naming_the_holder(locked_run, observe):
    first, _, second, _, _ = locked_run
    answers = {f"exit {s.returncode}" + (", holder named" if f"pid {first.proc.pid} " in s.stderr else "")
               for s in second}
    observe("second run on a locked run id", "exit 2, holder named", " / ".join(sorted(answers)))
    for out in second:
        assert out.returncode == 2, out.stderr
        assert f"is in use by opmatrix run (pid {first.proc.pid} on" in out.stderr
        assert "Traceback" not in out.stderr


def test_the_first_run_completes_intact_beside_the_refused_one(locked_run):
    first, code, _, leftovers, _ = locked_run
    assert code == 0, first.stderr[-3000:]
    final = rows(first.folder)
    assert sorted(key(r) for r in final) == sorted(planned())  # every job once: no duplicate keys
    assert {r["status"] for r in final} == {"ok"}
    assert len(json.loads((first.folder / "run.json").read_text())["sessions"]) == 1
    assert leftovers == []


TAMPERED = [  # (what, line appended to a finished run's results.jsonl, what the report must say about it)
    ("garbage", "this is not JSON at all", "Expecting value"),
    ("rel_err text", None, "field 'rel_err' has the wrong type: 'abc'"),
    ("status a number", None, "field 'status' must be a non-empty string, got 5"),
    ("a JSON list", "[1, 2, 3]", "a result row is a JSON object, got list"),
    ("null", "null", "a result row is a JSON object, got NoneType"),
    ("empty object", "{}", "field 'run_id' must be a non-empty string"),
    ("cut short", None, "Unterminated string"),
]


def test_a_tampered_results_file_is_reported_line_by_line_and_strict_refuses(locked_run, tmp_path, observe):
    first = locked_run[0]
    folder = tmp_path / "tampered"
    shutil.copytree(first.folder, folder)
    valid = (folder / "results.jsonl").read_text().splitlines()
    row = json.loads(valid[0])
    lines = {"rel_err text": json.dumps(dict(row, rel_err="abc")), "status a number": json.dumps(dict(row, status=5)),
             "cut short": valid[0][:valid[0].index('"cell": "') + 12]}  # ends inside a string, as a crash may
    damaged = [line if line is not None else lines[what] for what, line, _ in TAMPERED]
    (folder / "results.jsonl").write_text("\n".join(valid + damaged))  # the cut-short row is last, unterminated
    report_before = (folder / "report.md").read_bytes()

    strict = opmatrix("report", folder, "--strict")
    after_strict = (folder / "report.md").read_bytes(), (folder / "skipped.txt").exists()
    plain = opmatrix("report", folder)
    numbers = [len(valid) + i for i in range(1, len(TAMPERED) + 1)]
    listed = [f"{folder / 'results.jsonl'}:{n}:" in plain.stdout for n in numbers]
    observe("tampered results.jsonl (7 bad lines)", "7 skipped, strict exit 2",
            f"{sum(listed)} skipped, strict exit {strict.returncode}")

    assert strict.returncode == 2 and "Traceback" not in strict.stderr
    assert f"{len(TAMPERED)} line(s) are not valid result rows" in strict.stderr
    assert all(f"results.jsonl:{n}:" in strict.stderr for n in numbers)
    assert after_strict == (report_before, False)  # refused before writing anything

    assert plain.returncode == 0, plain.stderr[-3000:]
    assert f"{len(TAMPERED)} line(s) of {folder / 'results.jsonl'} skipped" in plain.stdout
    assert all(listed), plain.stdout
    text = (folder / "skipped.txt").read_text()
    for (what, _, why), n in zip(TAMPERED, numbers):
        assert f"results.jsonl:{n}: " in text and why in text.splitlines()[numbers.index(n)], (what, text)
    assert f"{len(valid)} results" in (folder / "report.md").read_text()  # built from the valid rows only
