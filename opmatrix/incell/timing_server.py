"""The worker side of paired timing: a worker whose build passed its correctness check stays alive and times
short bursts of its call on request, so the cell runner can interleave every contestant in rounds.

Protocol (one JSON object per line): requests arrive on the worker's stdin, replies go to the file descriptor
named by OPMATRIX_REPLY_FD (stdout and stderr stay the worker's log).
    worker -> {"event": "ready"}                      after correctness passed
    runner -> {"op": "burst", "warmup_ms": W, "rep_ms": R}
    worker -> {"samples_ms": [...], "timer": T, "state": {telemetry} | null, "checked": N}
              or {"error": "...", "status": S}
    runner -> {"op": "finish"}                        the worker returns to write its row and exit
Only one contestant touches the device at a time: the runner sends the next burst only after the reply.
After every burst the timed call's checked calls run (opmatrix.incell.integrity): a contestant caught there answers
with its status (mismatch or suspect) instead of samples, and its timing is discarded.
Stdlib only (measure and telemetry import torch / triton / NVML lazily).
"""
from __future__ import annotations

import json
import os
import sys
from opmatrix.core import status
from opmatrix.incell import integrity, measure, phases, telemetry

REPLY_FD_ENV = "OPMATRIX_REPLY_FD"


class Replies:
    """The reply channel to the cell runner."""

    def __init__(self, fd: int) -> None:
        self.stream = os.fdopen(fd, "w", buffering=1, encoding="utf-8")

    def send(self, message: dict) -> None:
        self.stream.write(json.dumps(message) + "\n")
        self.stream.flush()


def serving() -> Replies | None:
    """The reply channel when the cell runner started this worker as a timing server, else None."""
    fd = os.environ.get(REPLY_FD_ENV)
    return Replies(int(fd)) if fd else None


def serve(call: integrity.TimedCall, device, replies: Replies, requests=None) -> list[float]:
    """Answer burst requests until told to finish (or the runner goes away); every sample timed, every burst
    followed by its checked calls. Between bursts
    the worker gives back the device memory its caching allocator keeps, so a server waiting for its turn holds
    only what its call keeps alive and a call with a large transient (attention's score matrix) finds room."""
    requests = requests or sys.stdin
    gpu = telemetry.open_for(device)
    replies.send({"event": "ready"})
    timed: list[float] = []
    try:
        for line in requests:
            request = json.loads(line)
            if request.get("op") != "burst":
                break
            try:
                timing = measure.time_callable(call, device.torch, request["warmup_ms"], request["rep_ms"])
                call.after_burst(timing.samples_ms)
            except integrity.Cheat as cheat:  # wrong output of a checked timed call, or work skipped while timed
                replies.send({"error": cheat.error[:2000], "status": cheat.status})
                break
            except Exception as exc:  # a kernel that fails on a later call: runtime_error, or oom
                replies.send({"error": f"{type(exc).__name__}: {exc}"[:2000],
                              "status": phases.failure_status(exc, status.RUNTIME_ERROR)})
                break
            measure.release_cached(device.torch)
            timed.extend(timing.samples_ms)
            replies.send({"samples_ms": timing.samples_ms, "timer": timing.timer,
                          "state": gpu.sample() if gpu else None, "checked": call.checks.passed})
    finally:
        if gpu:
            gpu.close()
    return timed
