"""A disk that fills during a run (issue 29, item 5), for real: the reports folder is a small tmpfs, and once the
first row is stored the test fills it to the last byte (ENOSPC). The next row cannot be written: the run must stop
cleanly (exit 3, no traceback, the session closed in run.json), keep the row before it, leave no partial line in
results.jsonl, and `--resume` must complete the run into a store that `report --strict` accepts. Also: a row keeps
at most SAMPLES_KEPT timing samples (its size is bounded), with `reps` counting them all. On the embedded-Ray path
and --no-ray."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from opmatrix.incell.timed_rows import SAMPLES_KEPT, kept_samples
from tests.faults import plugins
from tests.faults.harness import key, left_behind, opmatrix, rows
from tests.faults.runs import Run, planned

DISK = "4m"


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of DISK mounted for this test alone (root only: skipped where mount is not allowed)."""
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(folder: Path) -> int:
    """Write a file until the disk says ENOSPC; its size."""
    written = 0
    with open(folder / "filler", "wb", buffering=0) as fh:
        try:
            while True:
                written += fh.write(bytes(64 * 1024))
        except OSError:
            pass
        try:  # the last few bytes
            while True:
                written += fh.write(b"x" * 512)
        except OSError:
            pass
    return written


@pytest.mark.parametrize("ray", [False, True], ids=["no-ray", "embedded-ray"])
def test_a_full_disk_stops_the_run_cleanly_and_resume_completes_it(tmp_path, small_disk, run_id, ray, observe):
    later = tmp_path / "later"
    matrix = plugins.plain_matrix(tmp_path, later_gate=later)
    reports = small_disk / "reports"
    run = Run(matrix, reports, run_id, ray=ray)
    first = run.first_rows()
    filled = fill(small_disk)
    later.touch()
    code = run.wait(180)
    leftovers = left_behind(run.scratch)
    text = (run.folder / "results.jsonl").read_bytes()
    stored = rows(run.folder)
    manifest = json.loads((run.folder / "run.json").read_text())
    whole = text.endswith(b"\n")
    print(f"filled {filled} bytes after row 1; exit {code}; {len(stored)} row(s), results.jsonl ends with newline: "
          f"{whole}; interrupted={manifest['sessions'][-1]['interrupted']!r}; "
          f"report.md {(run.folder / 'report.md').is_file()}\n{run.stderr[-800:]}")
    strict = opmatrix("report", run.folder, "--strict")  # no partial line: the stopped run reads clean
    (small_disk / "filler").unlink()
    # --resume is the same whichever scheduler stored the rows: it runs once, after the --no-ray case
    resumed = None if ray else opmatrix("run", matrix, "--no-ray", "--run-id", run_id, "--reports", reports,
                                        "--resume", "--fail-on", "lost,env_error,crashed")
    final = rows(run.folder)
    observe(f"disk full mid-run ({'Ray' if ray else 'no Ray'})", "exit 3, no partial line",
            f"exit {code}, " + ("no partial line" if text.endswith(b"\n") and len(stored) == len(text.splitlines())
                                else "partial line"),
            lost=len({key(r) for r in first} - {key(r) for r in stored})
            + (0 if resumed is None else len(planned() - {key(r) for r in final})),
            left_behind=len(leftovers))

    assert code == 3, run.stderr[-3000:]
    assert "Traceback" not in run.stderr and "is full" in run.stderr, run.stderr[-3000:]
    assert stored[:len(first)] == first and len(stored) < len(planned())
    assert text.endswith(b"\n") and len(text.splitlines()) == len(stored)  # whole rows only
    assert manifest["sessions"][-1]["interrupted"] == "disk full" and manifest["sessions"][-1]["finished_at"]
    assert leftovers == []
    assert strict.returncode == 0, strict.stderr[-3000:]
    if resumed is not None:
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert {key(r) for r in final} == planned()
        assert opmatrix("report", run.folder, "--strict").returncode == 0
    assert all(len(r["samples_ms"]) <= SAMPLES_KEPT and r["reps"] >= len(r["samples_ms"]) for r in final)


def test_a_row_keeps_at_most_the_stated_number_of_samples_evenly_spaced():
    samples = [float(i) for i in range(100_000)]
    kept = kept_samples(samples)
    assert len(kept) == SAMPLES_KEPT and kept[0] == 0.0 and kept[-1] == 99_999.0
    assert kept == sorted(kept)  # time order
    gaps = {b - a for a, b in zip(kept, kept[1:])}
    assert max(gaps) - min(gaps) <= 1  # evenly spaced
    assert kept_samples(samples[:10]) == samples[:10]
