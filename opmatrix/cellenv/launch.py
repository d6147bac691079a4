"""Run one cell inside its own environment: nox builds (or reuses) it, the cell runner runs inside it, and
results stream back line by line as they are produced.

`run_cell_in_env(plan)` is the unit a scheduler calls, locally or on the host that owns the device. It yields
exactly one Result per planned job: when the environment cannot be built, or the runner dies, the jobs that
got no result are reported as `env_error` / `crashed` rows instead of disappearing.
"""
from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

from opmatrix import paths
from opmatrix.core import status
from opmatrix.incell.cell_runner import RESULT_PREFIX, past_deadline
from opmatrix.core.result import Result

LOG_TAIL_LINES = 40


def nox_command(plan_file: Path, session: str) -> list[str]:
    return [sys.executable, "-m", "nox", "--noxfile", str(paths.NOXFILE), "--sessions", session,
            "--reuse-venv", "yes", "--envdir", str(paths.ROOT / ".nox")]


def run_cell_in_env(plan: dict, extra_env: dict | None = None) -> Iterator[Result]:
    scratch = Path(plan["scratch_dir"])
    scratch.mkdir(parents=True, exist_ok=True)
    plan_file = scratch / "plan.json"
    plan_file.write_text(json.dumps(plan, indent=1))
    env = dict(os.environ, OPMATRIX_CELL_PLAN=str(plan_file), **(extra_env or {}))
    done: set[tuple] = set()
    tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)
    with open(scratch / "nox.log", "w") as log:
        proc = subprocess.Popen(nox_command(plan_file, plan["session"]), env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1, cwd=paths.ROOT)
        try:
            for line in proc.stdout:
                if line.startswith(RESULT_PREFIX):
                    result = Result.from_json(line[len(RESULT_PREFIX):])
                    done.add(result.key())
                    yield result
                else:
                    log.write(line)
                    log.flush()
                    tail.append(line.rstrip())
            code = proc.wait()
        except BaseException:
            proc.kill()
            raise
    if code == 0 and (len(done) == len(plan["jobs"]) or past_deadline(plan)):
        return  # complete, or stopped at the run's deadline (the rest is left for --resume)
    yield from missing_results(plan, done, code, "\n".join(tail))


def missing_results(plan: dict, done: set[tuple], code: int, log_tail: str) -> Iterator[Result]:
    """Rows for the jobs of a cell that produced no result: env_error if the runner never reported anything
    (the environment did not build), crashed if it died part-way."""
    kind = status.ENV_ERROR if not done else status.CRASHED
    what = ("the cell environment could not be built or its runner failed to start" if not done
            else "the cell runner exited before this job reported")
    for job in plan["jobs"]:
        result = cell_result(plan, job, kind, f"{what} (nox exit code {code}); see {plan['scratch_dir']}/nox.log")
        if result.key() not in done:
            result.stderr_tail = log_tail[-4000:]
            yield result


def cell_result(plan: dict, job: dict, status_: str, error: str) -> Result:
    """A result row for a job that never ran, carrying the cell's identity from the plan."""
    cell, device = plan["cell"], plan["cell"]["device"]
    return Result(run_id=plan["run_id"], cell=cell["id"], device=device["id"], toolchain=cell["toolchain"]["name"],
                  env_hash=cell["env_hash"], vendor=device["vendor"], arch=device["arch"], status=status_,
                  error=error, kernel=job["kernel"], workload=job["workload"], dtype=job["dtype"],
                  backend=job["backend"], variant=job["variant"])
