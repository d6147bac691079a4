"""`opmatrix run`: matrix file -> planned cells -> results stored as they arrive -> report."""
from __future__ import annotations

import datetime
import shutil
import socket
from pathlib import Path

from opmatrix import hosts, paths, plan, report, schedule
from opmatrix.result import Result
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


class Progress:
    """One line per result as it lands, with a running count: long runs show where they are."""

    def __init__(self, total: int, console) -> None:
        self.total, self.done, self.console = total, 0, console

    def __call__(self, r: Result) -> None:
        self.done += 1
        speed = f" {r.median_ms:.4g} ms" if r.median_ms is not None else ""
        colour = {"ok": "green", "no_host": "dim", "unsupported": "yellow", "not_installed": "yellow"}.get(
            r.status, "red")
        self.console.print(f"[{self.done:>4}/{self.total}] {r.cell} {r.kernel} {r.workload} {r.dtype} "
                           f"{r.backend}{'' if r.variant == 'default' else '[' + r.variant + ']'} -> "
                           f"[{colour}]{r.status}[/]{speed}", highlight=False)


def run(matrix_path: str | Path, reports_dir: Path = paths.REPORTS, run_id: str | None = None,
        console=None, scratch_root: Path = paths.SCRATCH) -> Path:
    from rich.console import Console

    console = console or Console()
    matrix = load_matrix(matrix_path)
    plan.check_plugins(matrix)
    run_id = run_id or new_run_id(matrix.name)
    plans = cell_plans(matrix, run_id, Path(scratch_root))
    store = ResultStore(Path(reports_dir) / run_id)
    local = hosts.detect_local()
    assigned = hosts.resolve(matrix.device, local)
    host_summary = "; ".join(f"{h.vendor} {h.name} ({h.arch})" for h in local)
    shutil.copyfile(matrix.source, store.run_dir / "matrix.toml")
    manifest = {"run_id": run_id, "matrix": str(Path(matrix.source).relative_to(paths.ROOT))
                if Path(matrix.source).is_relative_to(paths.ROOT) else matrix.source,
                "started_at": _now(), "driver_host": socket.gethostname(), "host_devices": host_summary,
                "cells": {p["cell"]["id"]: len(p["jobs"]) for p in plans},
                "baseline": matrix.acceptance.baseline, "acceptance": matrix.acceptance.model_dump()}
    store.write_manifest(manifest)
    total = sum(len(p["jobs"]) for p in plans)
    console.print(f"opmatrix run {run_id}: {len(plans)} cells, {total} jobs; this host: {host_summary}")
    progress = Progress(total, console)
    for result in schedule.run_local(plans, assigned, host_summary):
        store.append(result)
        progress(result)
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
