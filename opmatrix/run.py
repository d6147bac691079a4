"""`opmatrix run`: matrix file -> planned cells -> results stored as they arrive -> report.

The run folder is locked for the whole run. Ctrl-C or SIGTERM stops the run in order: no new job starts, the
running ones are ended (their cell environments and workers with them), what finished is reported, and the run
is marked interrupted in run.json so `--resume` completes it.
"""
from __future__ import annotations

import contextlib
import datetime
import os
import shutil
import socket
import time
from pathlib import Path

from opmatrix import paths, plan, report
from opmatrix.interrupts import Interrupted, as_interrupts
from opmatrix.cellenv import scratch
from opmatrix.decide import effort, stats
from opmatrix.decide import verdicts as verdict_rules
from opmatrix.core.jobs import DEFAULT_MIN_SPEEDUP, CellPlan, baseline_job
from opmatrix.core.result import Result
from opmatrix.manifest import RunManifest, Session
from opmatrix.matrix import load_matrix
from opmatrix.progress import ProgressView
from opmatrix.scheduling.dispatch import SchedulerError
from opmatrix.store import (COMPARISON, CUT, MANIFEST, REPORT_HTML, RESULTS_JSONL, SKIPPED, VERDICTS_JSON,
                            DiskFull, ResultStore, RowsMissing, StoreError, known_runs)

DISK_FULL = "disk full"  # run.json's `interrupted` of a session stopped by a full disk (store.DiskFull)
SKIPPED_SHOWN = 20  # damaged lines listed in the terminal; skipped.txt has them all
MISSING_SHOWN = 10  # lost rows and missing jobs named in an error; the rest counted
# OPMATRIX_HTML=0: `run` and `report` write no report.html / comparison.html (each costs a matplotlib import and
# a second or two of charts); the Markdown, JSON and JUnit outputs are unchanged. The test suite sets it, except
# for the tests of the pages themselves. `opmatrix compare --html` and `history --html` write theirs regardless.
HTML_ENV = "OPMATRIX_HTML"


def html_pages() -> bool:
    return os.environ.get(HTML_ENV, "1") != "0"


class RunExists(Exception):
    """The run folder already holds results and --resume was not given, or --resume names no run."""


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
        keep_scratch: bool = False, rebuild: bool = False) -> Path:
    """Run a matrix file. scheduler: a RayScheduler (default: embedded local Ray) or a LocalScheduler.
    resume: continue the run folder `run_id`, running only the jobs it has no row for (or a row to redo).
    deadline_s: start no job after this many seconds; what is left is for a later --resume.
    keep_scratch: leave the run's scratch as it is, instead of pruning it after the session (cellenv.scratch).
    rebuild: build compile-only jobs again instead of reusing an earlier run's rows, and start kept build caches
    empty (opmatrix.incell.compile_cache).
    Raises Interrupted (after writing the report) when stopped by SIGINT / SIGTERM, DiskFull when the reports
    folder's disk filled (the rows before it kept, no partial row left; the report written if there is room).
    A run writes its rows within a reserve of space it gives back at the end (store.RESERVE), so that run.json and
    the report still fit once the disk has filled."""
    from rich.console import Console

    console = console or Console()
    if run_id is not None:
        paths.check_run_id(run_id)  # before anything is read or written: an id is one folder under reports_dir
    matrix = load_matrix(matrix_path)
    plan.check_plugins(matrix)
    if resume and not _started(Path(reports_dir) / str(run_id)):
        raise RunExists(f"--resume: no run {run_id!r} under {reports_dir} to continue; runs there: "
                        f"{', '.join(known_runs(reports_dir)) or 'none'}")
    run_id = paths.check_run_id(run_id or paths.new_run_id(matrix.name))
    store = ResultStore(Path(reports_dir) / run_id)
    store.check_writable()  # a read-only or full reports folder is refused before anything runs
    planned = [p.replace(rebuild=rebuild) for p in plan.cell_plans(matrix, run_id, Path(scratch_root))]
    with store.lock():
        if resume and (cut := store.repair_tail()):
            console.print(f"{store.jsonl}: its last line was cut short by a crash ({len(cut)} characters, no row); "
                          f"moved to {store.run_dir / CUT}, and its job runs again", highlight=False, markup=False,
                          soft_wrap=True)
        stored = store.results()
        if stored and not resume:
            raise RunExists(f"{store.run_dir} already holds {len(stored)} results: add --resume to continue it, "
                            "or choose another --run-id")
        plans = session_plans(planned, stored if resume else None, redo, deadline_s)
        shutil.copyfile(matrix.source, store.run_dir / "matrix.toml")
        for i, included in enumerate(matrix.workload_files(), 1):  # the run folder holds the shapes it ran
            shutil.copyfile(included, store.run_dir / f"workloads_from-{i}-{included.name}")
        previous = store.read_manifest() if resume else None
        manifest = new_manifest(matrix, run_id, planned, previous)
        session = Session(started_at=_now(), jobs=sum(len(p.all_jobs()) for p in plans), deadline_s=deadline_s,
                          sources_changed=edited_since_last_session(previous, manifest, console))
        manifest.sessions.append(session)
        interrupted = None
        received: dict = {}  # the driver's own record of every row this session stored, by job key
        store.reserve()
        try:
            with as_interrupts():
                _schedule(scheduler or _default_scheduler(), plans, matrix, store, manifest, session, console,
                          received)
        except SchedulerError:
            if not stored and not resume:  # the scheduler never started: leave no folder of a run that did not run
                shutil.rmtree(store.run_dir, ignore_errors=True)
            raise
        except Interrupted as exc:
            interrupted = exc
            session.interrupted = exc.signal
            console.print(f"{exc}: no new job started, running jobs ended; what finished is stored", highlight=False)
        except DiskFull as exc:
            interrupted = exc
            session.interrupted = DISK_FULL
            console.print(f"{exc}; running jobs ended", highlight=False, markup=False, soft_wrap=True)
        finally:
            store.release()  # the reserve, given back: room for run.json and the report
        if not keep_scratch:
            pruned = scratch.prune(planned, store.results())
            console.print(scratch.describe(pruned, str(Path(scratch_root) / run_id)), highlight=False, markup=False,
                          soft_wrap=True)
        session.finished_at = manifest.finished_at = _now()
        manifest.cells_wall_s = round(sum(s.cells_wall_s or 0 for s in manifest.sessions), 3)
        lost = restore_lost(store, received)
        try:
            store.write_manifest(manifest)
            folder = finish(store, console)
        except OSError as exc:
            if not isinstance(interrupted, DiskFull):
                raise
            console.print(f"the report was not written ({exc.strerror or exc}): free space, then `opmatrix report "
                          f"{run_id}` writes it (or --resume continues the run)", highlight=False, markup=False,
                          soft_wrap=True)
            folder = store.run_dir
    if interrupted is not None:
        raise interrupted
    check_complete(store, planned, lost, session.deadline_s)
    return folder


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
    ran = [r for r in latest if r.status not in (status.NO_HOST, *status.BUILD_ONLY)]
    meant = [r for r in ran if not (r.status == status.OK and not r.timer)]  # correctness-only rows are not
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
        acceptance=matrix.acceptance.model_dump(), kernels_dir=str(matrix.kernels_dir()),
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


def shown_path(path: Path) -> str:
    """A file of the run as a message names it: from the working folder when it lies below it
    (reports/<run>/report.md), else in full."""
    path = Path(path).absolute()
    cwd = Path.cwd()
    return str(path.relative_to(cwd)) if path.is_relative_to(cwd) else str(path)


def _display_path(source: str) -> str:
    path = Path(source)
    return str(path.relative_to(paths.ROOT)) if path.is_relative_to(paths.ROOT) else source


def finish(store: ResultStore, console, strict: bool = False) -> Path:
    """Consolidate the store, write report.md and show the same tables; the one ending of `run` and `report`.
    Lines of results.jsonl that are not valid rows are skipped and listed (terminal and skipped.txt); strict:
    refuse with StoreError instead, before writing anything.
    Paths and the matrix name are printed escaped: a folder named `[x]` is data, not rich markup."""
    from rich.markup import escape

    df = _consolidated(store, console, strict)
    manifest = store.manifest()
    if len(df) < manifest.reported_rows:
        raise StoreError(f"{store.run_dir}: its report was made from {manifest.reported_rows} rows and "
                         f"{store.jsonl.name} holds {len(df)} now: the report, verdicts.json and results.parquet are "
                         "left as they are (rows lost since; restore results.jsonl, or delete run.json's "
                         "reported_rows to report from what is left)")
    df, verdicts = decided(df, manifest)
    if verdicts is not None:
        (store.run_dir / VERDICTS_JSON).write_text(verdict_rules.to_json(verdicts), encoding="utf-8")
    path = report.write_markdown(df, manifest, store.run_dir / "report.md", verdicts)
    page = report.write_html(df, manifest, store.run_dir / REPORT_HTML, verdicts) if html_pages() else None
    report.print_terminal(df, console, verdicts, full_text=shown_path(path))
    write_comparisons(df, manifest, store.run_dir, console)
    if manifest.run_id and (store.run_dir / MANIFEST).is_file():
        manifest.reported_rows = len(df)
        store.write_manifest(manifest)
    console.print(f"results: {escape(str(store.run_dir / 'results.parquet'))}\nreport:  {escape(str(path))}\n"
                  f"page:    {escape(str(page)) if page else f'not written ({HTML_ENV}=0)'}", soft_wrap=True)
    left = manifest.planned_jobs - len(df)
    if left > 0:
        resume = f"opmatrix run {manifest.matrix or 'MATRIX'} --run-id {manifest.run_id} --resume"
        console.print(f"[yellow]{left} of {manifest.planned_jobs} planned jobs have no result yet "
                      f"({stopped_by(manifest)}): continue with `{escape(resume)}`[/]", soft_wrap=True)
    return store.run_dir


def _consolidated(store: ResultStore, console, strict: bool):
    """The store read once (results.jsonl: its skipped lines said, or refused under strict) and consolidated from
    that reading; the rows as read are let go once the frame holds them."""
    loaded = store.load()
    skipped = loaded.skipped
    if skipped and strict:
        raise StoreError(f"{store.jsonl}: {len(skipped)} line(s) are not valid result rows, and --strict reports "
                         "only from an undamaged store:\n" + "\n".join(f"  {s}" for s in skipped[:SKIPPED_SHOWN])
                         + (f"\n  ... and {len(skipped) - SKIPPED_SHOWN} more" if len(skipped) > SKIPPED_SHOWN else ""))
    _note_skipped(store, skipped, console)
    return store.consolidate(loaded=loaded)


def write_comparisons(df, manifest: RunManifest, folder: Path, console) -> list:
    """A run of a matrix with [[compare]]: the upgrade verdicts (comparison.md / .json / .junit.xml / .html) and a
    summary."""
    from rich.markup import escape

    from opmatrix.report.html.compare_page import write_compare_page
    from opmatrix.upgrade import compare, cross_host

    min_speedup = float(manifest.acceptance.get("min_speedup", DEFAULT_MIN_SPEEDUP))
    comparisons = [compare.compare_paired(df, b, c, min_speedup, manifest.run_id, manifest)
                   for b, c in compare.declared_pairs(manifest.compare, df)]
    comparisons += cross_host.declared(df, manifest.compare_hosts, min_speedup, manifest.run_id, console)
    if not comparisons:
        return []
    (folder / f"{COMPARISON}.json").write_text(compare.to_json(comparisons), encoding="utf-8")
    (folder / f"{COMPARISON}.md").write_text(compare.markdown(comparisons), encoding="utf-8")
    (folder / f"{COMPARISON}.junit.xml").write_text(compare.junit_xml(comparisons), encoding="utf-8")
    if html_pages():
        write_compare_page(comparisons, folder / f"{COMPARISON}.html", f"opmatrix compare: run {manifest.run_id}")
    for c in comparisons:
        console.print(f"upgrade {escape(c.baseline)} -> {escape(c.candidate)}: {c.verdict} "
                      f"({', '.join(f'{n} {k}' for k, n in sorted(c.counts().items()))}); "
                      f"{escape(str(folder / (COMPARISON + '.md')))}", soft_wrap=True)
    return comparisons


def decided(df, manifest: RunManifest):
    """(rows with their paired statistics, verdicts) for a run timed in rounds; (rows, None) for one that was not."""
    if not verdict_rules.has_pairs(df):
        return df, None
    df = stats.add_paired_columns(df)
    if manifest.lines_of_code:
        loc = effort.from_record(manifest.lines_of_code)
    else:  # a run stored before run.json recorded them: today's sources
        loc = effort.table(Path(manifest.kernels_dir or paths.BUILTIN_KERNELS), set(zip(df.kernel, df.backend)))
    return df, verdict_rules.decide(df, manifest.acceptance, loc)


def stopped_by(manifest: RunManifest) -> str:
    """Why a run has jobs without a result: the signal that interrupted its last session, its deadline, or
    neither."""
    if manifest.interrupted:
        return f"interrupted by {manifest.interrupted}"
    if manifest.sessions and manifest.sessions[-1].deadline_s is not None:
        return "stopped at the deadline"
    return "no deadline was set: their rows never came or were lost"


def _note_skipped(store: ResultStore, skipped: list[str], console) -> None:
    """Say how many lines of results.jsonl the report leaves out and why, in the terminal and in skipped.txt beside
    report.md (removed once the store reads clean, so it never outlives the damage it describes)."""
    from rich.markup import escape

    listing = store.run_dir / SKIPPED
    if not skipped:
        listing.unlink(missing_ok=True)
        return
    listing.write_text("".join(f"{line}\n" for line in skipped), encoding="utf-8")
    console.print(f"[yellow]{len(skipped)} line(s) of {escape(str(store.jsonl))} skipped: not valid result rows "
                  f"(all listed in {escape(str(listing))}); the report is built from the other rows[/]", soft_wrap=True)
    for line in skipped[:SKIPPED_SHOWN]:
        console.print(f"  {escape(line)}", highlight=False, soft_wrap=True)
    if len(skipped) > SKIPPED_SHOWN:
        console.print(f"  ... and {len(skipped) - SKIPPED_SHOWN} more", highlight=False)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
