"""Ctrl-C and SIGTERM on the default path, an embedded local Ray (issue 29, item 1): the driver waits on Ray in
short steps and raises the signal between them (opmatrix.interrupts), and ray.init's own SIGTERM handler is put
back to ours. A job whose build hangs (it waits at a gate) is running when the signal comes: the run must end
within seconds with 130 / 143, report.md written, the signal in run.json, no traceback and nothing left running.
The --no-ray path is tested in test_run_faults.py."""
from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.faults import plugins
from tests.faults.harness import left_behind, wait_for
from tests.faults.runs import Run

STOP_WITHIN_S = 20  # the signal to the driver's exit, Ray's shutdown included, on a busy 2-core machine


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_an_embedded_ray_run_while_a_build_hangs(tmp_path, run_id, sig, observe):
    gate = tmp_path / "gate"
    matrix = plugins.plain_matrix(tmp_path, gate=gate)
    reports = tmp_path / "reports"
    run = Run(matrix, reports, run_id, ray=True)
    jobs = Path(run.scratch) / "cpu.host" / "jobs"
    wait_for(lambda: any(p.read_text() == "build" for p in jobs.glob("*/phase")), 240, "a build to hang", run.proc)
    sent = time.monotonic()
    run.proc.send_signal(sig)
    code = run.wait(120)
    took = time.monotonic() - sent
    leftovers = left_behind(run.scratch)
    gate.touch()
    manifest = json.loads((run.folder / "run.json").read_text())
    interrupted = manifest["sessions"][-1]["interrupted"]
    print(f"{sig.name}: exit {code} after {took:.1f} s; run.json interrupted={interrupted!r}; "
          f"report.md {(run.folder / 'report.md').is_file()}; left behind {leftovers}\n{run.stderr[-1500:]}")
    observe(f"{sig.name} of an embedded-Ray run (build hangs)", f"exit {128 + sig}, {sig.name}",
            f"exit {code}, {interrupted or '-'}", left_behind=len(leftovers))

    assert code == 128 + sig, run.stderr[-3000:]
    assert took < STOP_WITHIN_S, took
    assert "Traceback" not in run.stderr and "SystemError" not in run.stderr, run.stderr[-3000:]
    assert f"interrupted by {sig.name}; continue with --resume" in run.stderr
    assert interrupted == sig.name and manifest["sessions"][-1]["finished_at"]
    assert (run.folder / "report.md").is_file()
    assert leftovers == [], f"processes of the run still alive: {leftovers}"
