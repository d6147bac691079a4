"""Run one cell inside its own environment: nox builds (or reuses) it, the cell runner runs inside it, and
results stream back line by line as they are produced.

`run_cell_in_env(plan)` is the unit a scheduler calls, locally or on the host that owns the device. It yields
exactly one Result per planned job: when the environment cannot be built, or the runner dies, the jobs that
got no result are reported as `env_error` / `crashed` rows instead of disappearing. nox is started so that it dies
with its caller, and the cell runner dies with nox: killing `opmatrix run` leaves nothing running.
"""
from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

from opmatrix import paths
from opmatrix.core import status
from opmatrix.core.jobs import CellPlan
from opmatrix.core.result import Result
from opmatrix.incell.cell_runner import READY_LINE, RESULT_PREFIX
from opmatrix.incell.processes import kill_group, popen

LOG_TAIL_LINES = 40
PLAN_FILE = "plan.json"


def nox_command(session: str) -> list[str]:
    return [sys.executable, "-m", "nox", "--noxfile", str(paths.NOXFILE), "--sessions", session,
            "--reuse-venv", "yes", "--envdir", str(paths.ROOT / ".nox")]


@contextlib.contextmanager
def environment_lock(session: str):
    """One builder at a time per cell environment: nox creates, fills and reuses `.nox/<session>` without
    locking, so two runs on one machine that need the same environment (same toolchain, same device) take turns
    while it is built. Yields `release`, called once the cell runner has started in the finished environment:
    from then on the environment is only read, and the other run's cell may start (on another GPU, say)."""
    envdir = paths.ROOT / ".nox"
    envdir.mkdir(exist_ok=True)
    with open(envdir / f"{session}.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield lambda: fcntl.flock(fh, fcntl.LOCK_UN)
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def run_cell_in_env(plan: CellPlan, extra_env: dict | None = None) -> Iterator[Result]:
    scratch = Path(plan.scratch_dir)
    scratch.mkdir(parents=True, exist_ok=True)
    plan_file = scratch / PLAN_FILE
    plan_file.write_text(plan.to_json())
    env = dict(os.environ, OPMATRIX_CELL_PLAN=str(plan_file), **(extra_env or {}))
    done: set[tuple] = set()
    tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)
    with environment_lock(plan.session) as release_environment, open(scratch / "nox.log", "w") as log:
        proc = popen(nox_command(plan.session), new_group=True, env=env, stdout=subprocess.PIPE,
                     stderr=subprocess.STDOUT, text=True, bufsize=1, cwd=paths.ROOT)
        try:
            for line in proc.stdout:
                if line.startswith(RESULT_PREFIX):
                    result = Result.from_json(line[len(RESULT_PREFIX):])
                    done.add(result.key())
                    yield result
                elif line.rstrip("\n") == READY_LINE:
                    release_environment()
                else:
                    log.write(line)
                    log.flush()
                    tail.append(line.rstrip())
            code = proc.wait()
        except BaseException:  # Ctrl-C, SIGTERM, or the consumer stopped: end nox, the runner and its worker
            kill_group(proc)
            raise
    if code == 0 and (len(done) == len(plan.jobs) or plan.past_deadline()):
        return  # complete, or stopped at the run's deadline (the rest is left for --resume)
    yield from missing_results(plan, done, code, "\n".join(tail))


def missing_results(plan: CellPlan, done: set[tuple], code: int, log_tail: str) -> Iterator[Result]:
    """Rows for the jobs of a cell that produced no result: env_error if the runner never reported anything
    (the environment did not build), crashed if it died part-way."""
    kind = status.ENV_ERROR if not done else status.CRASHED
    what = ("the cell environment could not be built or its runner failed to start" if not done
            else "the cell runner exited before this job reported")
    for job in plan.jobs:
        if plan.key(job) in done:
            continue
        result = plan.row(job, kind, f"{what} (nox exit code {code}); see {plan.scratch_dir}/nox.log")
        result.phase = "environment" if kind == status.ENV_ERROR else ""  # where it failed, when it is known
        result.stderr_tail = log_tail[-4000:]
        yield result
