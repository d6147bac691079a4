"""The cell runner: run every job of one cell, each in a fresh worker process with a time limit, and judge them:
the jobs of one (kernel, workload, dtype) are built and checked, then timed together in rounds
(opmatrix.incell.rounds), by a judge (opmatrix.incell.judge) that lives in this process and nowhere else.

No contestant code is ever imported here: not a kernel implementation, not a backend adapter. This process holds
what a verdict rests on (the spec it loaded itself, the seeds, the references, the clock, the rows); a worker
holds only its own build and the buffers the judge hands it.

`run_cell(plan)` yields one Result per job, whatever happens to the worker: a segfault becomes `crashed`, a hang
`timeout`, and the next job goes on. Run as `python -m opmatrix.incell.cell_runner PLAN.json` inside the cell's
environment, it prints each result as one `OPMATRIX-RESULT {json}` line the moment it exists. Stdlib only at import.

Each job gets a scratch folder named by its full key, emptied before the job starts.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

from opmatrix.core import metrics, status
from opmatrix.core.jobs import SHORT_CALL_MS, CellPlan, DeviceInfo, JobSpec, Mode, baseline_job
from opmatrix.core.keys import JobKey
from opmatrix.core.result import Result
from opmatrix.incell import compile_cache, entry, gpu_tools
from opmatrix.incell.processes import become_subreaper, die_with_parent, end_escaped, run_limited, tail, wait_limited
from opmatrix.incell.rounds import Contestant, Rounds
from opmatrix.incell.forkserver import ForkServer
from opmatrix.incell.servers import ServerGone
from opmatrix.incell.timed_rows import judged, kept_samples, timed

RESULT_PREFIX = "OPMATRIX-RESULT "
READY_LINE = "OPMATRIX-CELL-READY"  # the environment is built and the runner started: it may be shared now
PYTHON_PREFIX = "OPMATRIX-CELL-PYTHON "  # Mode.PREPARE: how to start a worker in this environment (JSON)
NOW_PREFIX = "OPMATRIX-NOW "  # what the cell is doing between two rows (a group's builds, its rounds): JSON text
# where the cell has got to, for the rows of a runner that dies: {"group": [kernel, workload, dtype], "phase": P}
STAGE_PREFIX = "OPMATRIX-STAGE "
ENV_PASSED_ON = ("PATH", "VIRTUAL_ENV", "PYTHONPATH")  # with the toolchain's own [toolchain] env
PROBE_TIMEOUT_S = 300  # facts (imports) and ceilings (a few large matmuls), in one process
FACT_FIELDS = ("host", "device_name", "driver", "runtime", "python", "torch", "tilelang", "triton")


def probe(module: str, args: list[str], scratch: Path, python: str = sys.executable,
          env: dict | None = None, forks: ForkServer | None = None) -> dict | None:
    """Run `python -m opmatrix.incell.<module> OUT ARGS...` in this environment (or the one `python` and `env`
    name) with a time limit; its JSON (what it wrote before a crash or the time limit counts too). With `forks`
    (this environment's fork server) it is forked from the server instead: the framework is imported already."""
    scratch.mkdir(parents=True, exist_ok=True)
    out = scratch / f"{module}.json"
    out.unlink(missing_ok=True)
    argv, env, log = [str(out), *args], env or dict(os.environ), scratch / f"{module}.log"
    if forks is None or not _forked(forks, module, argv, env, log):
        run_limited([python, "-m", f"opmatrix.incell.{module}", *argv], env, log, PROBE_TIMEOUT_S)
    try:
        return json.loads(out.read_text())
    except (OSError, ValueError):
        return None


def _forked(forks: ForkServer, module: str, argv: list[str], env: dict, log: Path) -> bool:
    """`module`'s main(argv) in a child of the fork server, within PROBE_TIMEOUT_S; False when the server could
    not start it (the caller then starts a new interpreter)."""
    with open(log, "wb") as out:
        child = forks.spawn(argv, env, out.fileno(), out.fileno(), main=module)
        if child is None:
            return False
        wait_limited(child, PROBE_TIMEOUT_S)
    return True


def contest_groups(jobs) -> list[list[JobSpec]]:
    """Jobs of one (kernel, workload, dtype) contest together; the plan keeps them next to each other."""
    groups: dict[tuple, list[JobSpec]] = {}
    for job in jobs:
        groups.setdefault(job.contest, []).append(job)
    return list(groups.values())


def peers_adjacent(jobs: list[JobSpec]) -> list[JobSpec]:
    """A group's jobs with each candidate-toolchain job right after its peer (the same backend[variant] under the
    baseline toolchain): a block cut by device memory then falls between pairs, not inside one."""
    rivals = {(j.backend, j.variant): j for j in jobs if j.rival}
    order = []
    for job in jobs:
        if job.rival and job in order:
            continue
        order.append(job)
        rival = None if job.rival else rivals.get((job.backend, job.variant))
        if rival is not None:
            order.append(rival)
    return order


def out_of_memory(row: Result) -> bool:
    return row.status == status.OOM or "out of memory" in row.error.lower()


class CellRunner:
    def __init__(self, plan: CellPlan, on_now: Callable[[str], None] | None = None,
                 on_stage: Callable[[tuple, str], None] | None = None) -> None:
        self.plan = plan
        self.on_now = on_now or (lambda text: None)  # progress between rows, for the run's progress view
        self.on_stage = on_stage or (lambda group, phase: None)  # a group's phase: build, then timing
        self.scratch = Path(plan.scratch_dir)
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.kept: dict[JobKey, compile_cache.KeptBuild] = {}  # jobs building into kept caches, until their row
        # first: the probe below and every worker are forked from it (one import of the framework per cell)
        self.forks = ForkServer.start(str(self.scratch), self.scratch / "forkserver.log")
        d = plan.cell.device
        dtypes = [] if plan.mode is Mode.COMPILE or not plan.jobs else sorted({j.dtype for j in plan.jobs})
        measured = probe("cell_probe", [d.vendor, str(plan.settings.ceilings_kept_h), *dtypes], self.scratch,
                         forks=self.forks) or {}
        self.facts = measured.get("facts") or {
            "runtime": f"cell probe failed: {tail(self.scratch / 'cell_probe.log')[-300:]}"}
        self.ceilings = measured.get("ceilings") or {}
        arch = d.arch if d.arch != "auto" else self.facts.get("arch", "")
        self.device = DeviceInfo(d.id, d.vendor, arch, self.facts.get("device_name", ""))
        self.rival_forks: ForkServer | None = None  # a [[compare]]: the candidate toolchain's own fork server
        self.rival_env, self.rival_facts = self._rival()
        self.starter = entry.Starter(plan, self.device, self.forks, self.rival_forks, self.rival_env, self.on_now)
        # [run] profile / sanitize: each GPU contestant's call once more under Nsight Compute and compute-sanitizer,
        # in processes of their own, once its row is made (opmatrix.incell.gpu_tools)
        profiles = Path(plan.profile_dir) if plan.profile_dir else self.scratch / gpu_tools.PROFILES
        self.tools = gpu_tools.Tools(plan.settings, self.device, profiles, self.on_now)
        self.own: dict[JobKey, tuple[Path, Path]] = {}  # a job's own folder and compile cache, until its row

    def _rival(self) -> tuple[dict, dict]:
        """A [[compare]]: the environment a candidate-toolchain worker starts with, and what that toolchain
        imports (its own probe, facts only: the ceilings stay the device's, measured once above). Its workers
        and probe are forked from a fork server of that environment (one import of its framework per cell)."""
        rival = self.plan.rival
        if rival is None:
            return {}, {}
        own = set(self.plan.cell.toolchain.env)
        env = {k: v for k, v in os.environ.items() if k not in own and k not in ENV_PASSED_ON}
        env.update(rival.env)
        scratch = Path(rival.scratch_dir)
        scratch.mkdir(parents=True, exist_ok=True)
        self.rival_forks = ForkServer.start(str(scratch), scratch / "forkserver.log", rival.python, env)
        measured = probe("cell_probe", [self.plan.cell.device.vendor, "0"], scratch, rival.python, env,
                         self.rival_forks) or {}
        facts = measured.get("facts") or {"runtime": f"cell probe failed: {tail(scratch / 'cell_probe.log')[-300:]}"}
        return env, facts

    def results(self) -> Iterator[Result]:
        try:
            for group in contest_groups(self.plan.partners + self.plan.all_jobs()):
                if self.plan.past_deadline():
                    return  # not started, no row: `opmatrix run --resume` picks these jobs up
                yield from self.run_group(group)
        finally:
            for forks in (self.forks, self.rival_forks):
                if forks is not None:
                    forks.close()
            self._escaped("the cell's end")

    def run_group(self, jobs: list[JobSpec]) -> Iterator[Result]:
        """Every job of one (kernel, workload, dtype) builds and checks in its own worker; the survivors, the
        baseline and its A/A twin are then timed together in rounds. A job that ends before it is ready to time
        (failed, unsupported, correctness-only, compile-only) yields its row at once. When a contestant runs out
        of device memory beside the others, the ones already waiting are timed first (a block), and it starts
        again in the next block, beside only the baseline and its twin; its row says so. So does one that runs out
        during the rounds (once)."""
        self.group = entry.Group(self.plan, jobs, self.device)
        try:
            yield from self._run_group(jobs)
        finally:
            self.group.close()

    def _run_group(self, jobs: list[JobSpec]) -> Iterator[Result]:
        pending, base, twin, first_round, block = peers_adjacent(jobs), None, None, 0, 0
        base_job = baseline_job(jobs, self.plan.settings.baseline)
        again: dict[JobKey, str] = {}  # jobs that ran out of device memory during a block's rounds: why, by job key
        group = f"{jobs[0].kernel} {jobs[0].workload} {jobs[0].dtype}"
        while pending and not self.plan.past_deadline():
            block += 1
            self.on_stage(jobs[0].contest, "build")
            self.on_now(f"{group}: building and checking {len(pending)} contestant(s)")
            members: list[Contestant] = []
            base, twin = yield from self._seat(pending, members, base_job, (base, twin), again, block)
            racers = members + [b for c in members for b in c.builds] \
                + [c for c in (base, twin) if c is not None and c not in members]
            if not racers:
                break
            self.on_stage(jobs[0].contest, "timing")
            rounds = Rounds(racers, base, self.plan.settings, first_round, self._round_progress(group, racers),
                            settle=self.plan.rival is None,  # a toolchain pair stays together in every round
                            bursts=self.group.judge)
            rounds.run()
            first_round += rounds.count
            yield from self._end_block(members, base, twin, racers, pending, again, block)
        if base is not None and base.job in self.plan.partners:
            base.end()  # timed only as the resumed contestants' partner: its row is already stored
        elif base is not None:
            yield self._timed_row(base, base, twin)
        if twin is not None:
            twin.end()
            self._escaped(f"the A/A twin of {group}")  # on no row: the twin has none

    def _seat(self, pending: list[JobSpec], members: list[Contestant], base_job: JobSpec | None,
              base_twin: tuple[Contestant | None, Contestant | None], again: dict, block: int):
        """Start pending jobs into this block's `members` until none is left or the device runs out of memory (the
        job that ran out, and the peer it is timed beside, wait for the next block). Yields the rows of jobs that
        ended before their timing; returns the baseline and its twin (started with the baseline's job)."""
        base, twin = base_twin
        while pending and not self.plan.past_deadline():
            started = self._start(pending[0])
            if isinstance(started, Result) and out_of_memory(started) and any(c is not base for c in members):
                peer = self._peer(pending[0], members)
                if peer is not None and peer is not base:  # a pair is timed in one block, or it is not paired
                    peer.end()
                    members.remove(peer)
                    pending.insert(0, peer.job)
                break  # retried in the next block, with less beside it on the device
            job = pending.pop(0)
            if isinstance(started, Result):
                if job not in self.plan.partners:
                    yield started
                continue
            started.block = block
            started.notes.extend(filter(None, [again.get(self.plan.key(job))]))
            if job == base_job:
                base, twin = started, self._start_twin(job)
            elif job not in self.plan.partners:
                failed = self._start_builds(started)
                if failed is not None:
                    yield failed
                    continue
            members.append(started)
        return base, twin

    def _round_progress(self, group: str, racers: list[Contestant]):
        settings = self.plan.settings
        return lambda count, seconds, visiting: self.on_now(
            f"{group}: {count} rounds in {seconds:.0f} s, now of {visiting} of {len(racers)} timing servers "
            f"(at least {settings.rounds}, at most {settings.max_rounds})")

    def _end_block(self, members: list[Contestant], base: Contestant | None, twin: Contestant | None,
                   racers: list[Contestant], pending: list[JobSpec], again: dict[JobKey, str],
                   block: int) -> Iterator[Result]:
        """After a block's rounds: each member's row (the baseline's waits for the group's last block), or its job
        back at the head of `pending` to be timed again in the next block."""
        for c in members:
            for b in c.builds:
                b.end()
            if self._time_again(c, base, racers, again, block):
                c.end()
                pending.insert(0, c.job)
            elif c.job in self.plan.partners and c is not base:
                c.end()  # a resumed candidate's peer, timed beside it: its own row is already stored
            elif c is not base:
                yield self._timed_row(c, base, twin, self._peer(c.job, racers))

    def _time_again(self, c: Contestant, base: Contestant | None, racers: list[Contestant], again: dict[JobKey, str],
                    block: int) -> bool:
        """A contestant that ran out of device memory during the rounds, beside timing servers that hold theirs, is
        started once more in the next block (the contestants timed so far are gone by then), rather than stored as
        a failure of its own. Not a toolchain pair's member: a pair is timed in one block."""
        key = self.plan.key(c.job)
        if (c.failure is None or c.failure.row.status != status.OOM or c is base or key in again
                or c.job in self.plan.partners or self.plan.rival is not None):
            return False
        beside = len(racers) - 1 - len(c.builds)
        again[key] = (f"out of device memory in round {len(c.round_ms) + 1} beside {beside} other timing servers: "
                      f"started again and timed in block {block + 1}")
        return True

    @staticmethod
    def _peer(job: JobSpec, members: list[Contestant]) -> Contestant | None:
        """A candidate toolchain's job: its contestant among `members` of the same backend[variant] under the
        baseline toolchain (never the A/A twin)."""
        if not job.rival:
            return None
        return next((m for m in members if not m.job.rival and not m.is_twin and not m.is_extra_build
                     and (m.job.backend, m.job.variant) ==
                     (job.backend, job.variant)), None)

    def job_folder(self, job: JobSpec, suffix: str = "") -> Path:
        """This job's own scratch, emptied: nothing from an earlier run, attempt or job survives into it. A
        rival's job lives under the rival cell's scratch: its compile caches are never the baseline's."""
        scratch = Path(self.plan.rival.scratch_dir) if job.rival and self.plan.rival else self.scratch
        folder = scratch / "jobs" / (self.plan.key(job).folder_name() + suffix)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        return folder

    def _start(self, job: JobSpec, suffix: str = "") -> Contestant | Result:
        """Start the job's worker and take it through build, first call and correctness trials: a Contestant ready
        to time, or the job's row. The job itself (not its A/A twin or further builds, which build cold) compiles
        into its kept caches under build_cache = "kept"."""
        folder = self.job_folder(job, suffix)
        kept = None if suffix else compile_cache.kept_build(self.plan, job)
        if kept is not None:
            self.kept[self.plan.key(job)] = kept
        cache = kept.folder if kept is not None else folder / "cache"
        if not suffix:
            self.own[self.plan.key(job)] = (folder, cache)
        started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        clock = time.perf_counter()
        started = self.starter.start(job, self.group, folder, cache, twin=suffix == "-aa-twin")
        if isinstance(started, Contestant):
            return started
        return self._finish(job, started, started_at, time.perf_counter() - clock, own=not suffix)

    def _start_twin(self, job: JobSpec) -> Contestant | None:
        """The baseline once more, built independently: its ratio to the baseline is the noise floor."""
        twin = self._start(job, suffix="-aa-twin")
        if not isinstance(twin, Contestant):
            return None
        twin.is_twin = True
        return twin

    def _start_builds(self, first: Contestant) -> Result | None:
        """More builds where Settings.builds_of gives them ([run] builds, or two of a contestant whose builds
        vary): build the job again, each in a worker of its own with an empty cache, and keep the builds ready to
        time beside the first. A further build that fails (wrong result, crash, hang, build
        error) fails the job: its row is that failure, the first build's worker is stopped. One that does not fit
        in device memory beside the others is left out, and the row says so."""
        seat = first.seat  # a launch-bound GPU call: its time is its process's (SHORT_CALL_MS)
        short = seat is not None and not seat.judge.is_cpu and seat.estimate_ms is not None \
            and seat.estimate_ms < SHORT_CALL_MS
        count = self.plan.settings.builds_of(first.builds_vary or short)
        for n in range(2, count + 1):
            build = self._start(first.job, suffix=f"-build{n}")
            if isinstance(build, Contestant):
                build.is_extra_build, build.block = True, first.block
                first.builds.append(build)
                continue
            if out_of_memory(build):
                first.notes.append(f"build {n} of {count} left out: out of device memory "
                                   "beside the others")
                continue
            for c in (first, *first.builds):
                c.end()
            return dataclasses.replace(build, error=f"build {n} of {count}: {build.error}")
        return None

    def _timed_row(self, c: Contestant, base: Contestant | None, twin: Contestant | None,
                   peer: Contestant | None = None) -> Result:
        """A contestant's row once its rounds are over: what the rounds measured and the judge observed, or why it
        failed (what its correctness trials found is kept)."""
        if c.failure is None:  # what its bursts together show, in any of its builds
            finding = next(filter(None, (b.seat.finding() for b in (c, *c.builds) if b.seat is not None)), None)
            if finding is not None:
                c.failure = ServerGone(finding)
        row = c.row
        if c.failure is None:
            try:
                row = self._views(c, timed(judged(dataclasses.replace(row, phase="done"), c), c, base, twin, peer,
                                           self.plan.cell.toolchain.name))
                c.server.finish(c.job.timeout_s)
            except ServerGone as gone:
                c.failure = gone
        c.end()
        if c.failure is not None:
            gone = c.failure.row
            row = dataclasses.replace(judged(c.row, c), status=gone.status, phase=gone.phase, error=gone.error,
                                      stderr_tail=c.server.log_tail())
        return self._finish(c.job, row, c.started_at, c.server.elapsed())

    def _views(self, c: Contestant, row: Result) -> Result:
        """The worker's extra GPU views of its call (CUDA-graph replay, CUPTI): informative, never judged."""
        settings = self.plan.settings
        if not self.device.is_gpu or not (settings.crosscheck or row.median_ms < settings.cuda_graph_below_ms):
            return row
        views, _ = c.server.request({"op": "views", "median_ms": row.median_ms}, "views", c.job.timeout_s)
        found = {k: float(views[k]) for k in ("crosscheck_events_ms", "cupti_ms", "graph_median_ms")
                 if isinstance(views.get(k), (int, float))}
        if "cupti_ms" in found and "crosscheck_events_ms" in found and found["cupti_ms"] > 0:
            found["cupti_diff_pct"] = 100.0 * (found["crosscheck_events_ms"] - found["cupti_ms"]) / found["cupti_ms"]
        notes = [n[:300] for n in views.get("notes", []) if isinstance(n, str)]
        return dataclasses.replace(row, **found, timing_notes="; ".join(filter(None, [row.timing_notes, *notes])))

    def _tools(self, job: JobSpec, result: Result) -> Result:
        """The job's own row with what the GPU tools the run asked for found (profile, sanitizer; an `ok` row only;
        never a resumed contestant's partner, whose row is not stored again)."""
        key = self.plan.key(job)
        folder, cache = self.own.pop(key, (None, None))
        if folder is None or not self.tools.asked or result.status != status.OK or job in self.plan.partners:
            return result
        return self.tools.apply(result, self.starter.task(job, self.group.workload, cache), folder,
                                self.starter.python(job), self.starter.env(job), key.folder_name())

    @staticmethod
    def _escaped(whose) -> list[str]:
        """End what the workers that have ended so far left running outside their process groups (they are this
        subreaper's children now): "pid: command" of each, also said on stderr (the cell's nox.log)."""
        ended = end_escaped()
        if ended:
            print(f"opmatrix cell runner: killed {len(ended)} process(es) left running after {whose}: "
                  + "; ".join(ended), file=sys.stderr, flush=True)
        return ended

    def _finish(self, job: JobSpec, result: Result, started: str, elapsed: float, own: bool = True) -> Result:
        """Stamp the row with the job's identity and the cell's facts, then derive its metrics. `own`: the job's
        own row (not that of its A/A twin or a further build), which settles its kept caches."""
        kept = self.kept.pop(self.plan.key(job), None) if own else None
        if own:
            result = self._tools(job, result)
        if kept is not None:
            result = kept.settle(result, self.plan.run_id)
        facts = {key: str((self.rival_facts if job.rival else self.facts).get(key, "")) for key in FACT_FIELDS}
        identity = dict(self.plan.identity(job), arch=self.device.arch)  # 'auto' resolved on this host
        stamped = dataclasses.replace(result, **identity, **facts, started_at=started, duration_s=elapsed,
                                      samples_ms=kept_samples(result.samples_ms), reps=result.reps or
                                      len(result.samples_ms), left_running=self._escaped(self.plan.key(job)))
        return metrics.derive(stamped, self.ceilings)


def run_cell(plan: CellPlan, on_now: Callable[[str], None] | None = None,
             on_stage: Callable[[tuple, str], None] | None = None) -> Iterator[Result]:
    """The cell runner as a function: plan (cell, jobs, settings, folders) -> results, one per job; `on_now`
    hears what it is doing between two results, `on_stage` each group's phase (build, timing). Compile-only and
    unsupported rows an earlier run made from the same sources come from the cache (opmatrix.incell.compile_cache)."""
    if compile_cache.applies(plan):
        yield from compile_cache.through(plan, lambda rest: CellRunner(rest, on_now, on_stage).results())
        return
    yield from CellRunner(plan, on_now, on_stage).results()


def _say_now(text: str) -> None:
    sys.stdout.write(NOW_PREFIX + json.dumps(text) + "\n")
    sys.stdout.flush()


def _say_stage(group: tuple, phase: str) -> None:
    sys.stdout.write(STAGE_PREFIX + json.dumps({"group": list(group), "phase": phase}) + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    die_with_parent()
    become_subreaper()  # before any worker: what one leaves running outside its group becomes this process's to end
    plan = CellPlan.from_json(Path(argv[0]).read_text())
    sys.stdout.write(READY_LINE + "\n")
    if plan.mode is Mode.PREPARE:
        env = {k: os.environ[k] for k in (*ENV_PASSED_ON, *plan.cell.toolchain.env) if k in os.environ}
        sys.stdout.write(PYTHON_PREFIX + json.dumps({"python": sys.executable, "env": env}) + "\n")
        sys.stdout.flush()
        return 0
    sys.stdout.flush()
    for result in run_cell(plan, _say_now, _say_stage):
        sys.stdout.write(RESULT_PREFIX + result.to_json() + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
