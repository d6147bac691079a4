"""`opmatrix run`: matrix file -> planned cells -> results stored as they arrive -> report."""
from __future__ import annotations

import datetime
import shutil
import socket
import time
from pathlib import Path

from opmatrix import paths, plan, report
from opmatrix.progress import ProgressView
from opmatrix.matrix import Matrix, load_matrix
from opmatrix.store import ResultStore


def new_run_id(matrix_name: str) -> str:
    now = datetime.datetime.now(datetime.timezone.utc)
    return f"{now:%Y%m%d-%H%M%S}-{matrix_name}"


def cell_plans(matrix: Matrix, run_id: str, scratch_root: Path) -> list[dict]:
    plans = []
    for cell in plan.plan_cells(matrix):
        jobs = plan.plan_jobs(matrix, cell)
        if not jobs:
            continue
        plans.append({"run_id": run_id, "cell": cell.to_dict(), "session": cell.session,
                      "jobs": [vars(j) for j in jobs], "settings": matrix.run.model_dump(),
                      "kernels_dir": str(matrix.kernels_dir()), "backends_dir": str(matrix.backends_dir()),
                      "scratch_dir": str(scratch_root / run_id / cell.id)})
    return plans


class RunExists(Exception):
    """The run folder already holds results and --resume was not given."""


def remaining(plans: list[dict], stored: list, redo: set[str]) -> list[dict]:
    """--resume: the jobs with no stored row, or whose row's status is one to redo (default: lost)."""
    done = {r.key() for r in stored if r.status not in redo}
    left = []
    for p in plans:
        jobs = [j for j in p["jobs"] if (p["cell"]["id"], j["kernel"], j["workload"], j["dtype"], j["backend"],
                                         j["variant"]) not in done]
        if jobs:
            left.append(dict(p, jobs=jobs))
    return left


def run(matrix_path: str | Path, reports_dir: Path = paths.REPORTS, run_id: str | None = None,
        console=None, scratch_root: Path = paths.SCRATCH, scheduler=None, resume: bool = False,
        redo: frozenset[str] = frozenset({"lost"}), deadline_s: float | None = None) -> Path:
    """Run a matrix file. scheduler: a RayScheduler (default: embedded local Ray) or a LocalScheduler.
    resume: continue the run folder `run_id`, running only the jobs it has no row for (or a row to redo).
    deadline_s: start no job after this many seconds; what is left is for a later --resume."""
    from rich.console import Console

    console = console or Console()
    matrix = load_matrix(matrix_path)
    plan.check_plugins(matrix)
    run_id = run_id or new_run_id(matrix.name)
    planned_plans = plans = cell_plans(matrix, run_id, Path(scratch_root))
    planned = sum(len(p["jobs"]) for p in plans)
    store = ResultStore(Path(reports_dir) / run_id)
    stored = store.results()
    if stored and not resume:
        raise RunExists(f"{store.run_dir} already holds {len(stored)} results: add --resume to continue it, or "
                        "choose another --run-id")
    previous = store.manifest() if resume else {}
    if resume:
        plans = remaining(plans, stored, set(redo))
    if deadline_s is not None:
        deadline = time.time() + deadline_s
        plans = [dict(p, deadline=deadline) for p in plans]
    if scheduler is None:
        from opmatrix.scheduling.ray_cluster import RayScheduler

        scheduler = RayScheduler()
    shutil.copyfile(matrix.source, store.run_dir / "matrix.toml")
    manifest = {"run_id": run_id, "matrix": str(Path(matrix.source).relative_to(paths.ROOT))
                if Path(matrix.source).is_relative_to(paths.ROOT) else matrix.source,
                "started_at": previous.get("started_at", _now()), "driver_host": socket.gethostname(),
                "cells": {p["cell"]["id"]: len(p["jobs"]) for p in planned_plans},
                "planned_jobs": planned, "sessions": previous.get("sessions", []),
                "baseline": matrix.acceptance.baseline, "acceptance": matrix.acceptance.model_dump()}
    session = {"started_at": _now(), "jobs": sum(len(p["jobs"]) for p in plans), "deadline_s": deadline_s}
    with scheduler:
        manifest["scheduler"] = scheduler.describe()
        store.write_manifest(manifest)
        what = "resuming" if resume else "opmatrix run"
        console.print(f"{what} {run_id}: {len(plans)} cells, {session['jobs']} of {planned} jobs; "
                      f"{manifest['scheduler']}")
        started = time.perf_counter()
        with ProgressView(plans, console) as progress:
            for result in scheduler.run(plans, matrix.device, progress):
                store.append(result)
                progress.result(result)
        session["cells_wall_s"] = round(time.perf_counter() - started, 3)  # scheduler start-up excluded
    session["finished_at"] = manifest["finished_at"] = _now()
    manifest["sessions"] = manifest["sessions"] + [session]
    manifest["cells_wall_s"] = round(sum(s.get("cells_wall_s", 0) for s in manifest["sessions"]), 3)
    store.write_manifest(manifest)
    return finish(store, console)


def finish(store: ResultStore, console) -> Path:
    """Consolidate the store, write report.md and show the same tables; the one ending of `run` and `report`.
    Paths and the matrix name are printed escaped: a folder named `[x]` is data, not rich markup."""
    from rich.markup import escape

    manifest = store.manifest()
    df = store.consolidate(manifest.get("baseline", "torch"))
    path = report.write_markdown(df, manifest, store.run_dir / "report.md")
    report.print_terminal(df, console)
    console.print(f"results: {escape(str(store.run_dir / 'results.parquet'))}\nreport:  {escape(str(path))}",
                  soft_wrap=True)
    left = manifest.get("planned_jobs", len(df)) - len(df)
    if left > 0:
        resume = f"opmatrix run {manifest.get('matrix', 'MATRIX')} --run-id {manifest['run_id']} --resume"
        console.print(f"[yellow]{left} of {manifest['planned_jobs']} planned jobs have no result yet (stopped at "
                      f"the deadline): continue with `{escape(resume)}`[/]", soft_wrap=True)
    return store.run_dir


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
