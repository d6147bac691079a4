"""Run one cell inside its own environment: nox builds (or reuses) it, the cell runner runs inside it, and
results stream back line by line as they are produced.

`run_cell_in_env(plan)` is the unit a scheduler calls, locally or on the host that owns the device. It yields
exactly one Result per planned job: when the environment cannot be built, the jobs are `env_error` rows (phase
`environment`); when the runner dies after it started (killed, out of host memory), the jobs that got no result
are `lost` rows with the phase their group had reached (build, timing; none for a group not begun), which a
plain `--resume` runs again. nox is started so that it dies
with its caller, and the cell runner dies with nox: killing `opmatrix run` leaves nothing running.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import contextlib
import fcntl
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator

from opmatrix import paths
from opmatrix.core import status
from opmatrix.core.jobs import CellPlan, Mode
from opmatrix.core.result import Result
from opmatrix.incell.cell_runner import NOW_PREFIX, PYTHON_PREFIX, READY_LINE, RESULT_PREFIX, STAGE_PREFIX
from opmatrix.incell.processes import kill_group, popen

LOG_TAIL_LINES = 40
PLAN_FILE = "plan.json"


def nox_command(session: str) -> list[str]:
    return [sys.executable, "-m", "nox", "--noxfile", str(paths.CELL_NOXFILE), "--sessions", session,
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


class NoxCell:
    """One nox session run for a cell plan: the runner's protocol lines come out of `lines()`; everything else
    goes to the plan's nox.log (and the last lines to `tail`). The environment's lock is held until the runner
    says it started; `code` is nox's exit code once the lines are exhausted."""

    def __init__(self, plan: CellPlan, extra_env: dict | None) -> None:
        self.plan, self.extra_env = plan, extra_env or {}
        self.code: int | None = None
        self.ready = False  # the runner started in the finished environment
        self.tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)

    def lines(self) -> Iterator[str]:
        scratch = Path(self.plan.scratch_dir)
        scratch.mkdir(parents=True, exist_ok=True)
        plan_file = scratch / PLAN_FILE
        plan_file.write_text(self.plan.to_json())
        env = {**os.environ, "OPMATRIX_CELL_PLAN": str(plan_file), paths.ROOT_ENV: str(paths.ROOT), **self.extra_env}
        with environment_lock(self.plan.session) as release_environment, open(scratch / "nox.log", "w") as log:
            proc = popen(nox_command(self.plan.session), new_group=True, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, bufsize=1, cwd=paths.ROOT)
            try:
                for line in proc.stdout:
                    if line.startswith((RESULT_PREFIX, PYTHON_PREFIX, NOW_PREFIX, STAGE_PREFIX)):
                        yield line
                    elif line.rstrip("\n") == READY_LINE:
                        self.ready = True
                        release_environment()
                    else:
                        log.write(line)
                        log.flush()
                        self.tail.append(line.rstrip())
                self.code = proc.wait()
            except BaseException:  # Ctrl-C, SIGTERM, or the consumer stopped: end nox, the runner and its worker
                kill_group(proc)
                raise


def run_cell_in_env(plan: CellPlan, extra_env: dict | None = None,
                    on_now: Callable[[str], None] | None = None) -> Iterator[Result]:
    """Run a cell plan in its nox environment; one Result per job (and per job of its rival cell, if any).
    `on_now` hears what the cell is doing between two results (a group's builds, its rounds)."""
    if plan.rival is not None:
        plan, failed = prepare_rival(plan, extra_env)
        yield from failed
    cell = NoxCell(plan, extra_env)
    done: set[tuple] = set()
    reached = Reached()
    for line in cell.lines():
        if line.startswith(RESULT_PREFIX):
            result = Result.from_json(line[len(RESULT_PREFIX):])
            done.add(result.key())
            yield result
        elif line.startswith(NOW_PREFIX):
            reached.now = json.loads(line[len(NOW_PREFIX):])
            if on_now is not None:
                on_now(reached.now)
        elif line.startswith(STAGE_PREFIX):
            stage = json.loads(line[len(STAGE_PREFIX):])
            reached.groups[tuple(stage["group"])] = stage["phase"]
    if cell.code == 0 and (len(done) == len(plan.all_jobs()) or plan.past_deadline()):
        return  # complete, or stopped at the run's deadline (the rest is left for --resume)
    if cell.ready:
        yield from lost_results(plan, done, cell.code, "\n".join(cell.tail), reached)
    else:
        yield from missing_results(plan, done, cell.code, "\n".join(cell.tail))


@dataclasses.dataclass
class Reached:
    """What a cell runner had said before it ended: each group's phase (build, timing) and its last progress line."""
    groups: dict = dataclasses.field(default_factory=dict)  # (kernel, workload, dtype) -> phase
    now: str = ""


def lost_results(plan: CellPlan, done: set[tuple], code: int, log_tail: str, reached: Reached) -> Iterator[Result]:
    """Rows for the jobs of a cell whose runner started and then died without their results: `lost` (the runner,
    not the job, ended: a kill, the host out of memory), with the phase the job's group had reached, so that a
    plain --resume runs them again."""
    last = f"; it last reported: {reached.now}" if reached.now else ""
    for job in plan.all_jobs():
        if plan.key(job) in done:
            continue
        phase = reached.groups.get(job.contest, "")
        during = f"during this job's {phase}" if phase else "before this job started"
        result = plan.row(job, status.LOST, f"the cell runner ended {during} (nox exit code {code}){last}; see "
                                            f"{plan.scratch_dir}/nox.log; --resume runs it again")
        result.phase = phase
        result.stderr_tail = log_tail[-4000:]
        yield result


def prepare_rival(plan: CellPlan, extra_env: dict | None) -> tuple[CellPlan, list[Result]]:
    """A [[compare]]: build the candidate toolchain's environment first (its own nox session) and learn how to
    start Python in it, so the baseline cell's runner can time both in the same rounds. If it cannot be built,
    its jobs are env_error rows and the baseline cell runs alone."""
    own, rival = plan.without_rival()
    prepare = NoxCell(rival.replace(mode=Mode.PREPARE), extra_env)
    how = None
    for line in prepare.lines():
        if line.startswith(PYTHON_PREFIX):
            how = json.loads(line[len(PYTHON_PREFIX):])
    if prepare.code == 0 and how:
        return plan.replace(rival=dataclasses.replace(plan.rival, python=how["python"], env=how["env"])), []
    return own, list(missing_results(rival, set(), prepare.code, "\n".join(prepare.tail)))


def missing_results(plan: CellPlan, done: set[tuple], code: int, log_tail: str) -> Iterator[Result]:
    """Rows for the jobs of a cell whose runner never started (it never said it was ready): `env_error` in phase
    `environment`, the environment could not be built."""
    for job in plan.all_jobs():
        if plan.key(job) in done:
            continue
        result = plan.row(job, status.ENV_ERROR, "the cell environment could not be built or its runner failed to "
                                                 f"start (nox exit code {code}); see {plan.scratch_dir}/nox.log")
        result.phase = "environment"
        result.stderr_tail = log_tail[-4000:]
        yield result
