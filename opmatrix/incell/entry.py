"""One job from its worker's start until it is ready to be timed: loaded, built, seated at the judge, its first
call and its correctness trials judged; or its row, if it ends before that (not installed, unsupported, a build
error, a wrong output, a crash, a hang, compile-only).

`Group` is one (kernel, workload, dtype) as the judge's process sees it: the spec, loaded here from the kernel's
folder (never from a worker), the workload, the description every row of the group carries, and the judge, made
when the group's first contestant has built. A spec that fails (it does not load, or cannot make inputs or an
informative reference) fails every row of its group as `env_error` naming the spec: the spec's fault, never a
contestant's or a device's. Stdlib only at import.
"""
from __future__ import annotations

import dataclasses
import datetime
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Callable

from opmatrix.core import status
from opmatrix.core.jobs import CellPlan, DeviceInfo, JobSpec, Mode, WorkerTask
from opmatrix.core.result import Result, backend_label, clean_float
from opmatrix.incell import plugins
from opmatrix.incell.contents import SpecFault
from opmatrix.incell.forkserver import ForkServer
from opmatrix.incell.integrity import Cheat
from opmatrix.incell.phases import describe, failure_status, import_failed
from opmatrix.incell.plugins import PluginError
from opmatrix.incell.rounds import Contestant
from opmatrix.incell.servers import Server, ServerGone


def _text(value, most: int) -> str:
    """A worker's text, as the judge keeps it: a string, cut to `most` characters."""
    return value[:most] if isinstance(value, str) else ""


def _failure(server: Server, exc: Exception) -> Result:
    """The row's status, phase and error for what ended a job before its timing (its worker killed, where it
    still runs)."""
    if isinstance(exc, ServerGone):
        return dataclasses.replace(exc.row)
    server.kill()
    if isinstance(exc, Cheat):  # a wrong output on the first call is the first correctness trial's finding
        phase = "correctness" if exc.status == status.MISMATCH and server.phase == "first_call" else server.phase
        return Result(status=exc.status, phase=phase, error=exc.error)
    if isinstance(exc, SpecFault):  # the spec's fault: phase `spec`, which no verdict or deployment reads as a finding
        return Result(status=status.ENV_ERROR, phase=status.SPEC_PHASE, error=str(exc))
    # the judge's own failure (an arena that cannot be allocated): the row says so
    return Result(status=failure_status(exc, status.ENV_ERROR), phase=server.phase,
                  error=f"the judge failed: {describe(exc)}")


def _load_spec(kernels_dir: Path, kernel: str):
    """The kernel's spec; an import of it that fails is a PluginError naming the spec's file and line."""
    try:
        return plugins.load_spec(kernels_dir, kernel)
    except PluginError:
        raise
    except Exception as exc:
        raise PluginError(import_failed(exc, kernels_dir / kernel / "spec.py", f"kernels/{kernel}/spec.py")) from None


class Group:
    def __init__(self, plan: CellPlan, jobs: list[JobSpec], device: DeviceInfo) -> None:
        first = jobs[0]
        self.plan, self.jobs, self.device = plan, jobs, device
        self.kernel, self.dtype = first.kernel, first.dtype
        self.spec, self.workload, self.spec_error = None, dict(first.params), ""
        self.judge = None
        self.description: dict = {}
        try:
            self.spec = _load_spec(Path(plan.kernels_dir_of(first)), first.kernel)
            self.workload = dict(first.params) if first.params else dict(self.spec.WORKLOADS[first.workload])
            self.description = dict(shape=self.spec.describe(self.workload),
                                    flops=float(self.spec.flops(self.workload)),
                                    min_bytes=float(self.spec.min_bytes(self.workload, first.dtype)),
                                    tolerance=float(self.spec.tolerance(first.dtype)))
        except Exception as exc:  # a spec that does not load or describe its workload: the group's rows say so
            self.spec_error = f"the kernel's spec failed: {exc if isinstance(exc, PluginError) else describe(exc)}"

    def row(self, job: JobSpec) -> Result:
        return Result(kernel=job.kernel, workload=job.workload, dtype=job.dtype, backend=job.backend,
                      variant=job.variant, compile_cache="cold", **self.description)

    def workers(self) -> int:
        """How many workers the group seats at most: its jobs, the A/A twin, and the further builds."""
        return len(self.jobs) + 1 + (self.plan.settings.builds_of(True) - 1) * len(self.jobs)

    def judge_for(self):
        """The group's judge, made once (its first contestant has built). Raises SpecFault."""
        if self.spec_error:
            raise SpecFault(self.spec_error)
        if self.judge is None:
            from opmatrix.incell.judge import Judge

            try:
                self.judge = Judge(self.spec, self.workload, self.dtype, self.device, self.plan.settings,
                                   self.workers())
            except SpecFault as fault:
                self.spec_error = f"the kernel's spec failed: {fault}"
                raise SpecFault(self.spec_error) from None
        return self.judge

    def close(self) -> None:
        if self.judge is not None:
            self.judge.close()
            self.judge = None


class Starter:
    """Starts a job's worker (forked from the cell's fork server, or its candidate toolchain's) and takes it through
    load, build, seat, first call and trials."""

    def __init__(self, plan: CellPlan, device: DeviceInfo, forks: ForkServer | None, rival_forks: ForkServer | None,
                 rival_env: dict, on_now: Callable[[str], None]) -> None:
        self.plan, self.device, self.forks = plan, device, forks
        self.rival_forks, self.rival_env = rival_forks, rival_env
        self.on_now = on_now

    def env(self, job: JobSpec) -> dict:
        """The environment a worker of this job starts with (its candidate toolchain's, for a rival's job)."""
        return dict(self.rival_env if job.rival else os.environ)

    def python(self, job: JobSpec) -> str:
        """How a fresh interpreter of this job's environment is started (a process that is not forked from a fork
        server: one under a GPU tool, opmatrix.incell.gpu_tools)."""
        return self.plan.rival.python if job.rival and self.plan.rival is not None else sys.executable

    def task(self, job: JobSpec, workload: dict, cache: Path) -> WorkerTask:
        """What a worker of this job (or a process that builds and calls it once: opmatrix.incell.one_call) is
        asked to do."""
        env = self.env(job)
        return WorkerTask(job=job, mode=self.plan.mode, device=self.device, kernels_dir=self.plan.kernels_dir_of(job),
                          backends_dir=self.plan.backends_dir_of(job), settings=self.plan.settings,
                          attempt=uuid.uuid4().hex, workload=dict(workload), cache_dir=str(cache),
                          pinned_env={k: env.get(k, "") for k in self.plan.cell_of(job).toolchain.env})

    def start(self, job: JobSpec, group: Group, folder: Path, cache: Path, twin: bool) -> Contestant | Result:
        """A Contestant ready to time (its row so far in `.row`), or the job's row."""
        started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        server = self._server(job, group, folder, cache, twin)
        deadline = time.monotonic() + job.timeout_s

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        row, seats = group.row(job), []
        try:
            return self._ready(job, group, server, row, seats, left, started_at)
        except Exception as exc:
            failed = _failure(server, exc)
        if seats:
            _correct(row, seats[0])
            row.input_sets, row.timed_checks = seats[0].calls, seats[0].checked
            seats[0].close()
        return dataclasses.replace(row, status=failed.status, phase=failed.phase, error=failed.error,
                                   stderr_tail=server.log_tail())

    def _server(self, job: JobSpec, group: Group, folder: Path, cache: Path, twin: bool) -> Server:
        """The job's worker, started, saying while it builds what it is building and for how long."""
        task, env = self.task(job, group.workload, cache), self.env(job)
        server = (Server(task, folder, env, self.plan.rival.python, self.rival_forks) if job.rival
                  else Server(task, folder, env, forks=self.forks))
        label = backend_label(job.backend, job.variant) + (" (A/A twin)" if twin else "")

        def waiting(seconds: float, phase: str) -> None:
            self.on_now(f"{job.kernel} {job.workload} {job.dtype}: still building {label}, {seconds:.0f} s in phase "
                        f"{phase} (limit {job.timeout_s:g} s)")

        server.on_wait, server.limit_s = waiting, job.timeout_s
        return server

    def _ready(self, job: JobSpec, group: Group, server: Server, row: Result, seats: list,
               left: Callable[[], float], started_at: str) -> Contestant | Result:
        """Load, build, seat (appended to `seats`, which the caller closes on a failure), first call, trials: the
        job's Contestant, or its row where it is not to be timed (compile-only, an interpreter). Raises what
        _failure reads."""
        loaded = server.expect("loaded", left())
        row.backend_version = _text(loaded.get("backend_version"), 200)
        if self.plan.mode is Mode.COMPILE:
            return self._compiled(server, row, left())
        if group.spec_error:
            raise SpecFault(group.spec_error)
        server.phase = "build"
        built, window = server.request({"op": "build"}, "built", left())
        row.config, row.compile_cache = _text(built.get("config"), 100_000), _text(built.get("cache"), 200)
        judge = group.judge_for()
        seat = judge.seat(server, bool(loaded.get("returns_output")), left())
        seats.append(seat)
        server.phase = "first_call"
        row.compile_s = (window[1] - window[0]) + judge.first_call(seat, left())
        server.phase = "correctness"
        judge.trials(seat, left())
        _correct(row, seat)
        row.status = status.OK
        if loaded.get("timed") is False:  # an interpreter: its timings mean nothing
            row.timer = status.CORRECTNESS_ONLY
            server.finish(left())
            seats.pop().close()
            return dataclasses.replace(row, input_sets=seat.calls, timed_checks=seat.checked)
        server.phase, server.on_wait, server.limit_s = "timing", None, None
        return Contestant(job, server, seat=seat, row=row, started_at=started_at,
                          builds_vary=loaded.get("builds_vary") is True or autotuned(row.config))

    @staticmethod
    def _compiled(server: Server, row: Result, timeout_s: float) -> Result:
        """No host has the device: what the worker built for it (compiles / lowers), never run."""
        server.phase = "build"
        made, _ = server.request({"op": "compile"}, "compiled", timeout_s)
        server.finish(timeout_s)
        claimed = made.get("status")
        if claimed not in status.BUILD_ONLY:
            return dataclasses.replace(row, status=status.RUNTIME_ERROR, phase="build",
                                       error=f"the worker reported status {str(claimed)[:40]!r} for a compile-only "
                                             "build")
        seconds = made.get("compile_s")
        return dataclasses.replace(row, status=claimed, phase="done", error=_text(made.get("error"), 8000),
                                   config=_text(made.get("config"), 100_000),
                                   compile_s=float(seconds) if isinstance(seconds, (int, float)) else None)


def autotuned(config: str) -> bool:
    """Did the build choose its configuration by timing candidates (opmatrix.kit.tune records "tuning" in the
    configuration it reports)? Then another build may choose another."""
    import json

    try:
        return bool(json.loads(config).get("tuning")) if config else False
    except (ValueError, AttributeError):
        return False


def _correct(row: Result, seat) -> None:
    """What the correctness trials found, into the row."""
    verdict = seat.verdict
    row.trials, row.rel_err = verdict.trials, clean_float(verdict.rel_err)
    row.bad_elements = verdict.bad_elements
    row.worst_index = verdict.worst.where if verdict.bad_elements else ""
