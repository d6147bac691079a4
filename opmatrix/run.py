"""`opmatrix run`: matrix file -> planned cells -> results stored as they arrive -> report."""
from __future__ import annotations

import datetime
import shutil
import socket
import time
from pathlib import Path

from opmatrix import paths, plan, report
from opmatrix.progress import ProgressView
from opmatrix.spec import Matrix, load_matrix
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


def run(matrix_path: str | Path, reports_dir: Path = paths.REPORTS, run_id: str | None = None,
        console=None, scratch_root: Path = paths.SCRATCH, scheduler=None) -> Path:
    """Run a matrix file. scheduler: a RayScheduler (default: embedded local Ray) or a LocalScheduler."""
    from rich.console import Console

    console = console or Console()
    matrix = load_matrix(matrix_path)
    plan.check_plugins(matrix)
    run_id = run_id or new_run_id(matrix.name)
    plans = cell_plans(matrix, run_id, Path(scratch_root))
    store = ResultStore(Path(reports_dir) / run_id)
    if scheduler is None:
        from opmatrix.ray_schedule import RayScheduler

        scheduler = RayScheduler()
    shutil.copyfile(matrix.source, store.run_dir / "matrix.toml")
    manifest = {"run_id": run_id, "matrix": str(Path(matrix.source).relative_to(paths.ROOT))
                if Path(matrix.source).is_relative_to(paths.ROOT) else matrix.source,
                "started_at": _now(), "driver_host": socket.gethostname(),
                "cells": {p["cell"]["id"]: len(p["jobs"]) for p in plans},
                "baseline": matrix.acceptance.baseline, "acceptance": matrix.acceptance.model_dump()}
    total = sum(len(p["jobs"]) for p in plans)
    with scheduler:
        manifest["scheduler"] = scheduler.describe()
        store.write_manifest(manifest)
        console.print(f"opmatrix run {run_id}: {len(plans)} cells, {total} jobs; {manifest['scheduler']}")
        started = time.perf_counter()
        with ProgressView(plans, console) as progress:
            for result in scheduler.run(plans, matrix.device, progress):
                store.append(result)
                progress.result(result)
        manifest["cells_wall_s"] = round(time.perf_counter() - started, 3)  # scheduler start-up excluded
    manifest["finished_at"] = _now()
    store.write_manifest(manifest)
    return finish(store, console)


def finish(store: ResultStore, console) -> Path:
    manifest = store.manifest()
    df = store.consolidate(manifest.get("baseline", "torch"))
    path = report.write_markdown(df, manifest, store.run_dir / "report.md")
    report.print_terminal(df, console)
    console.print(f"results: {store.run_dir / 'results.parquet'}\nreport:  {path}")
    return store.run_dir


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
