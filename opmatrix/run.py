"""`opmatrix run`: matrix file -> planned cells -> results stored as they arrive -> report (opmatrix.report.build).

The run folder is locked for the whole run. Ctrl-C or SIGTERM stops the run in order: no new job starts, the
running ones are ended (their cell environments and workers with them), what finished is reported, and the run
is marked interrupted in run.json so `--resume` completes it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import shutil
import socket
import time
from pathlib import Path

from opmatrix import paths, plan
from opmatrix.cellenv import scratch
from opmatrix.core.errors import RunExists
from opmatrix.core.jobs import CellPlan, baseline_job
from opmatrix.core.result import Result
from opmatrix.decide import effort
from opmatrix.decide import verdicts as verdict_rules
from opmatrix.incell.gpu_tools import PROFILES
from opmatrix.interrupts import Interrupted, as_interrupts
from opmatrix.manifest import RunManifest, Session
from opmatrix.matrix import load_matrix
from opmatrix.progress import ProgressView
from opmatrix.report.build import finish, shown_path
from opmatrix.scheduling.dispatch import SchedulerError
from opmatrix.store import CUT, MANIFEST, RESULTS_JSONL, VERDICTS_JSON, DiskFull, ResultStore, RowsMissing, known_runs

DISK_FULL = "disk full"  # run.json's `interrupted` of a session stopped by a full disk (store.DiskFull)
MISSING_SHOWN = 10  # lost rows and missing jobs named in an error; the rest counted


def remaining(plans: list[CellPlan], stored: list[Result], redo: set[str]) -> list[CellPlan]:
    """--resume: the jobs with no stored row, or whose row's status is one to redo (default: lost). A resumed job
    is timed in rounds with its group's baseline (and a candidate toolchain's job with its peer under the
    baseline toolchain), so those run again as partners when they already have their rows: timed beside it,
    their own rows not stored twice."""
    done = {r.key() for r in stored if r.status not in redo}
    left = []
    for p in plans:
        jobs = tuple(j for j in p.all_jobs() if p.key(j) not in done)
        if jobs:
            wanted = [_partner(p, j) for j in jobs]
            partners = tuple(dict.fromkeys(j for pair in wanted for j in pair if j is not None and j not in jobs))
            left.append(p.with_jobs(jobs, partners))
    return left


def _partner(plan: CellPlan, job) -> tuple:
    """The jobs a resumed job must be timed beside: its group's baseline, and (a rival's job) its peer."""
    own = [j for j in plan.jobs if j.contest == job.contest]
    base = baseline_job(own, plan.settings.baseline)
    base = None if base == job else base
    peer = next((j for j in own if (j.backend, j.variant) == (job.backend, job.variant)), None) if job.rival else None
    return base, peer


def run(matrix_path: str | Path, reports_dir: Path = paths.REPORTS, run_id: str | None = None,
        console=None, scratch_root: Path = paths.SCRATCH, scheduler=None, resume: bool = False,
        redo: frozenset[str] = frozenset({"lost"}), deadline_s: float | None = None,
        keep_scratch: bool = False, rebuild: bool = False, profile: str | None = None, sanitize: bool = False) -> Path:
    """Run a matrix file. scheduler: a RayScheduler (default: embedded local Ray) or a LocalScheduler.
    resume: continue the run folder `run_id`, running only the jobs it has no row for (or a row to redo).
    deadline_s: start no job after this many seconds; what is left is for a later --resume.
    keep_scratch: leave the run's scratch as it is, instead of pruning it after the session (cellenv.scratch).
    rebuild: build compile-only jobs again instead of reusing an earlier run's rows, and start kept build caches
    empty (opmatrix.incell.compile_cache).
    profile, sanitize: as [run] profile and sanitize ask, whatever the matrix says (`--profile ncu`, `--sanitize`):
    each GPU contestant's call once more under Nsight Compute, under compute-sanitizer (opmatrix.incell.gpu_tools).
    Raises Interrupted (after writing the report) when stopped by SIGINT / SIGTERM, DiskFull when the reports
    folder's disk filled (the rows before it kept, no partial row left; the report written if there is room).
    A run writes its rows within a reserve of space it gives back at the end (store.RESERVE), so that run.json and
    the report still fit once the disk has filled."""
    from rich.console import Console

    console = console or Console()
    asked = {"profile": profile} if profile else {}
    asked.update({"sanitize": True} if sanitize else {})
    matrix, store, planned = _prepare(matrix_path, Path(reports_dir), run_id, Path(scratch_root), resume, rebuild,
                                      asked)
    with store.lock():
        stored = _stored_rows(store, resume, console)
        plans = session_plans(planned, stored if resume else None, redo, deadline_s)
        manifest, session = _open_session(matrix, store, planned, plans, resume, deadline_s, console)
        received: dict = {}  # the driver's own record of every row this session stored, by job key
        interrupted = _run_session(scheduler, plans, matrix, store, manifest, session, console, received,
                                   fresh=not stored and not resume)
        if not keep_scratch:
            pruned = scratch.prune(planned, store.results())
            console.print(scratch.describe(pruned, str(Path(scratch_root) / manifest.run_id)), highlight=False,
                          markup=False, soft_wrap=True)
        lost, folder = _close_session(store, manifest, session, received, interrupted, console)
    if interrupted is not None:
        raise interrupted
    check_complete(store, planned, lost, session.deadline_s)
    return folder


def _prepare(matrix_path: str | Path, reports_dir: Path, run_id: str | None, scratch_root: Path, resume: bool,
             rebuild: bool, asked: dict | None = None) -> tuple:
    """(matrix, store, planned cells) of a run, checked before anything is written: the run id, the matrix and its
    plugins, the folder --resume continues, a writable reports folder. `asked`: Settings fields the command line
    sets over the matrix's [run] (profile, sanitize); a profile's reports go to the run folder's profiles/."""
    if run_id is not None:
        paths.check_run_id(run_id)  # before anything is read or written: an id is one folder under reports_dir
    matrix = load_matrix(matrix_path)
    plan.check_plugins(matrix)
    if resume and not _started(reports_dir / str(run_id)):
        raise RunExists(f"--resume: no run {run_id!r} under {reports_dir} to continue; runs there: "
                        f"{', '.join(known_runs(reports_dir)) or 'none'}")
    run_id = paths.check_run_id(run_id or paths.new_run_id(matrix.name))
    store = ResultStore(reports_dir / run_id)
    store.check_writable()  # a read-only or full reports folder is refused before anything runs
    planned = [p.replace(rebuild=rebuild, settings=dataclasses.replace(p.settings, **(asked or {})),
                         profile_dir=str(store.run_dir.resolve() / PROFILES))
               for p in plan.cell_plans(matrix, run_id, scratch_root)]
    return matrix, store, planned


def _stored_rows(store: ResultStore, resume: bool, console) -> list[Result]:
    """The rows the (locked) run folder holds: on --resume after a last line cut short by a crash set aside; a
    folder with rows is refused unless resumed."""
    if resume and (cut := store.repair_tail()):
        console.print(f"{store.jsonl}: its last line was cut short by a crash ({len(cut)} characters, no row); "
                      f"moved to {store.run_dir / CUT}, and its job runs again", highlight=False, markup=False,
                      soft_wrap=True)
    stored = store.results()
    if stored and not resume:
        raise RunExists(f"{store.run_dir} already holds {len(stored)} results: add --resume to continue it, "
                        "or choose another --run-id")
    return stored


def _open_session(matrix, store: ResultStore, planned: list[CellPlan], plans: list[CellPlan], resume: bool,
                  deadline_s: float | None, console) -> tuple[RunManifest, Session]:
    """The run folder's copy of the matrix and of the workloads files it reads, and the manifest (the previous
    sessions' on --resume) with this session appended."""
    shutil.copyfile(matrix.source, store.run_dir / "matrix.toml")
    for i, included in enumerate(matrix.workload_files(), 1):  # the run folder holds the shapes it ran
        shutil.copyfile(included, store.run_dir / f"workloads_from-{i}-{included.name}")
    previous = store.read_manifest() if resume else None
    manifest = new_manifest(matrix, store.run_dir.name, planned, previous)
    session = Session(started_at=_now(), jobs=sum(len(p.all_jobs()) for p in plans), deadline_s=deadline_s,
                      sources_changed=edited_since_last_session(previous, manifest, console))
    manifest.sessions.append(session)
    return manifest, session


def _run_session(scheduler, plans: list[CellPlan], matrix, store: ResultStore, manifest: RunManifest,
                 session: Session, console, received: dict, fresh: bool) -> Interrupted | DiskFull | None:
    """This session's jobs scheduled, every row stored as it lands, within the store's reserve of space; the
    Interrupted or DiskFull that stopped it (its report is still to be written), None when it ran to its end. A
    scheduler that never started leaves no folder of a fresh run behind (fresh: no rows, no --resume)."""
    store.reserve()
    try:
        with as_interrupts():
            _schedule(scheduler or _default_scheduler(), plans, matrix, store, manifest, session, console, received)
    except SchedulerError:
        if fresh:  # the scheduler never started: leave no folder of a run that did not run
            shutil.rmtree(store.run_dir, ignore_errors=True)
        raise
    except Interrupted as exc:
        session.interrupted = exc.signal
        console.print(f"{exc}: no new job started, running jobs ended; what finished is stored", highlight=False)
        return exc
    except DiskFull as exc:
        session.interrupted = DISK_FULL
        console.print(f"{exc}; running jobs ended", highlight=False, markup=False, soft_wrap=True)
        return exc
    finally:
        store.release()  # the reserve, given back: room for run.json and the report
    return None


def _close_session(store: ResultStore, manifest: RunManifest, session: Session, received: dict,
                   interrupted: Exception | None, console) -> tuple[list, Path]:
    """The session's end in run.json, rows lost from results.jsonl restored, the report written (after a full disk,
    said not to be if it does not fit): (the lost rows' keys, the run folder)."""
    session.finished_at = manifest.finished_at = _now()
    manifest.cells_wall_s = round(sum(s.cells_wall_s or 0 for s in manifest.sessions), 3)
    lost = restore_lost(store, received)
    try:
        store.write_manifest(manifest)
        return lost, finish(store, console)
    except OSError as exc:
        if not isinstance(interrupted, DiskFull):
            raise
        console.print(f"the report was not written ({exc.strerror or exc}): free space, then `opmatrix report "
                      f"{manifest.run_id}` writes it (or --resume continues the run)", highlight=False, markup=False,
                      soft_wrap=True)
        return lost, store.run_dir


def restore_lost(store: ResultStore, received: dict) -> list:
    """The rows this session stored that results.jsonl no longer holds (a process deleted or rewrote the file while
    the run went on), written again from the driver's own record; their keys."""
    held = {r.key() for r in store.results()}
    lost = [key for key in received if key not in held]
    for key in lost:
        store.append(received[key])
    return lost


def unjudged(folder: Path, matrix) -> list[str]:
    """Why the run answered nothing, for whoever started it: each cell whose framework baseline is not installed in
    its environment (the cell, its nox session, its toolchain, and how to add the package), and a run that ran jobs
    on a host yet reached no verdict (correctness-only rows, of a backend whose timings would mean nothing here, are
    not meant to reach one). [] when the run judged what it ran."""
    import json

    from opmatrix.core import status

    latest = {r.key(): r for r in ResultStore(folder, create=False).results()}.values()
    baseline = matrix.acceptance.baseline
    cells = {c.id: c for c in plan.plan_cells(matrix)}
    missing: dict[str, Result] = {}
    for r in latest:
        if r.backend == baseline and r.status == status.NOT_INSTALLED:
            missing.setdefault(r.cell, r)
    out = [_not_installed(matrix, cells.get(cell), cell, r) for cell, r in sorted(missing.items())]
    # a row that declared its device not covered (unsupported: a compile-only run's Hopper-only kernel on an AMD
    # device, a library on a CPU) never ran, and a correctness-only row (its timings would mean nothing here) is not
    # meant to reach a verdict
    ran = [r for r in latest if r.status not in (status.NO_HOST, status.UNSUPPORTED, *status.BUILD_ONLY)]
    meant = [r for r in ran if not (r.status == status.OK and r.timer in ("", status.CORRECTNESS_ONLY))]
    path = Path(folder) / VERDICTS_JSON
    verdicts = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
    judged = [v for v in verdicts if v["verdict"] not in (verdict_rules.NOT_JUDGED, verdict_rules.NOT_RUN)]
    if meant and not judged:
        why = sorted({v["reason"].splitlines()[0] for v in verdicts if v["verdict"] == verdict_rules.NOT_JUDGED})
        out.append(f"no verdict: {len(ran)} job(s) ran on this run's hosts and nothing was judged ("
                   + ("; ".join(why[:3]) if why else f"no row of the baseline {baseline} was timed")
                   + f"); see {shown_path(Path(folder) / 'report.md')}")
    return out


def _not_installed(matrix, cell, cell_id: str, row: Result) -> str:
    """A cell whose baseline package is not importable: where, and how to add it to the cell's environment."""
    import re
    import sys

    reason = (row.error or "").strip().splitlines()
    found = re.match(r"(\S+) (?:is not importable|failed to import)", reason[0]) if reason else None
    package = found.group(1) if found else row.backend
    where = f"cell {cell_id}" + (f" (nox session {cell.session}, toolchain {cell.toolchain.name!r})" if cell else "")
    source = _display_path(str(matrix.source))
    if cell is not None and cell.toolchain.system:
        fix = (f"its toolchain has system = true, so it takes the packages of the interpreter opmatrix runs on: "
               f"install {package} there ({sys.executable} -m pip install {package}), or pin it in [[toolchain]] "
               f"{cell.toolchain.name!r} of {source}: "
               f'packages = ["{package}==VERSION"]')
    else:
        name = cell.toolchain.name if cell else row.toolchain
        fix = (f'add "{package}==VERSION" to packages of [[toolchain]] {name!r} in {source} (the cell\'s environment '
               "is built again for the new packages)")
    return (f"the baseline {row.backend} is not installed in the environment of {where}"
            + (f": {reason[0]}" if reason else "") + f"; nothing there was judged: {fix}")


def check_complete(store: ResultStore, planned: list[CellPlan], lost: list, deadline_s: float | None) -> None:
    """RowsMissing when rows were lost from results.jsonl during the session (they were restored), or when a
    planned job has no row though no deadline the user set stopped the run."""
    problems = []
    if lost:
        problems.append(f"{store.jsonl} lost {len(lost)} row(s) while the run went on (something deleted or rewrote "
                        f"it); restored from the driver's own record: {_named(lost)}")
    if deadline_s is None:
        held = {r.key() for r in store.results()}
        missing = [p.key(j) for p in planned for j in p.all_jobs() if p.key(j) not in held]
        if missing:
            problems.append(f"{len(missing)} planned job(s) have no row and no deadline stopped them: "
                            f"{_named(missing)}; run them with --resume")
    if problems:
        raise RowsMissing("; ".join(problems))


def _named(keys: list) -> str:
    shown = ", ".join(k.label() for k in keys[:MISSING_SHOWN])
    return shown + (f" and {len(keys) - MISSING_SHOWN} more" if len(keys) > MISSING_SHOWN else "")


def edited_since_last_session(previous: RunManifest | None, manifest: RunManifest, console) -> list[str]:
    """On --resume: the implementations whose sources changed since the previous session (their digests in the
    previous run.json against this session's), said in the terminal: this session's rows of them run other code
    than the earlier sessions'; `opmatrix compare` will not pair them."""
    if previous is None or not previous.sources:
        return []
    edited = effort.changed(previous.sources, manifest.sources)
    if edited:
        console.print(f"[yellow]sources changed since {previous.run_id}'s last session: {', '.join(edited)}; rows of "
                      "them from this session ran other code than the earlier sessions' rows[/]", highlight=False)
    return edited


def session_plans(planned: list[CellPlan], stored: list[Result] | None, redo: frozenset[str],
                  deadline_s: float | None) -> list[CellPlan]:
    """What this session runs: every planned job, or on --resume (stored rows given) what is missing or redone;
    with a deadline after which no job starts."""
    plans = planned if stored is None else remaining(planned, stored, set(redo))
    if deadline_s is None:
        return plans
    deadline = time.time() + deadline_s
    return [p.replace(deadline=deadline) for p in plans]


def _cell_jobs(planned: list[CellPlan]) -> dict[str, int]:
    """Planned jobs per cell, a [[compare]]'s candidate cell counted under its own id."""
    cells = {}
    for p in planned:
        cells[p.cell.id] = len(p.jobs)
        if p.rival is not None:
            cells[p.rival.cell.id] = len(p.rival.jobs)
    return cells


def new_manifest(matrix, run_id: str, planned: list[CellPlan], previous: RunManifest | None) -> RunManifest:
    """run.json of a new run, or of a resumed one (its start, sessions and lines of code are the first session's)."""
    pairs = {(job.kernel, job.backend) for p in planned for job in p.all_jobs()}
    folders = {}  # each kernel's folder (the project's, the package's, an installed package's) -> its pairs
    for kernel, backend in pairs:
        folders.setdefault(matrix.plugins().kernel_dir(kernel), set()).add((kernel, backend))
    loc = previous.lines_of_code if previous and previous.lines_of_code else effort.to_record(
        {key: n for folder, some in folders.items() for key, n in effort.table(folder, some).items()})
    now = dict(sorted((key, d) for folder, some in folders.items()
                      for key, d in effort.digests(folder, some).items()))
    sources = {**(previous.sources if previous else {}), **now}  # as of this session
    return RunManifest(
        run_id=run_id, matrix=_display_path(matrix.source), started_at=previous.started_at if previous else _now(),
        description=matrix.description, devices={d.id: d.description for d in matrix.device if d.description},
        driver_host=socket.gethostname(), cells=_cell_jobs(planned),
        planned_jobs=sum(len(p.all_jobs()) for p in planned), baseline=matrix.acceptance.baseline,
        acceptance=matrix.acceptance.record(), kernels_dir=str(matrix.kernels_dir()),
        compare=[[c.baseline, c.candidate] for c in matrix.compare], sessions=previous.sessions if previous else [],
        compare_hosts=[c.model_dump(exclude_none=True) for c in matrix.compare_hosts],
        lines_of_code=loc, sources=sources)


def _default_scheduler():
    from opmatrix.scheduling.ray_cluster import RayScheduler

    return RayScheduler()


def _schedule(scheduler, plans, matrix, store: ResultStore, manifest: RunManifest, session: Session,
              console, received: dict) -> None:
    with scheduler:
        manifest.scheduler = scheduler.describe()
        store.write_manifest(manifest)
        what = "resuming" if len(manifest.sessions) > 1 else "opmatrix run"
        console.print(f"{what} {manifest.run_id}: {len(plans)} cells, {session.jobs} of {manifest.planned_jobs} "
                      f"jobs; {manifest.scheduler}", highlight=False, markup=False)
        started = time.perf_counter()
        try:
            with ProgressView(plans, console, full_text=shown_path(store.run_dir / "report.md")) as progress, \
                    contextlib.closing(scheduler.run(plans, matrix.device, progress)) as results:
                for result in results:
                    store.append(result)
                    received[result.key()] = result
                    progress.result(result)
        finally:
            session.cells_wall_s = round(time.perf_counter() - started, 3)  # scheduler start-up excluded


def _started(folder: Path) -> bool:
    """A run folder --resume can continue: it has rows, or a run.json (a run stopped before its first row)."""
    return (folder / RESULTS_JSONL).is_file() or (folder / MANIFEST).is_file()


def _display_path(source: str) -> str:
    path = Path(source)
    return str(path.relative_to(paths.ROOT)) if path.is_relative_to(paths.ROOT) else source


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
