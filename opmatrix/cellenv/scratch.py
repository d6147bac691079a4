"""Pruning a run's scratch (.opmatrix/<run>/<cell>/) once a session has ended, by a stated policy.

The scratch holds each job's folder (its worker.log, result.json, phase, compile cache `cache/`; the A/A twin's and
further builds' beside it) and the cell's own files (plan.json, nox.log, forkserver and probe logs). A row carries
what is needed to understand it (status, phase, error, the last 4,000 characters of the worker's output), so:

- a job whose latest stored row did not fail (`ok`, `unsupported`, ...): its folders are removed;
- a job with no stored row (the session was stopped; `--resume` empties its folder before running it again): its
  folders are removed;
- a job whose latest row failed (core.status.FAILED): its folders are kept for a closer look, but their compile
  caches are removed and every file over KEEP_BYTES is cut to its last KEEP_BYTES;
- the cell's own files are kept, cut to their last KEEP_BYTES likewise.

Pruning runs on the machine that runs `opmatrix run`: the scratch of cells that ran on other nodes of a Ray cluster
stays on those nodes.
"""
from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from opmatrix.core import status
from opmatrix.core.jobs import CellPlan
from opmatrix.core.result import Result

KEEP_BYTES = 1024 * 1024
POLICY = ("removed: the folders of jobs whose row did not fail and of jobs with no row; kept: failed jobs' folders "
          "without their compile caches, every file cut to its last 1 MiB")


@dataclass
class Pruned:
    freed: int = 0  # bytes
    kept_failed: int = 0  # job folders kept for failed rows
    removed: int = 0  # job folders removed


def prune(plans: list[CellPlan], rows: list[Result]) -> Pruned:
    """Apply the policy to the scratch of every cell of `plans` found on this machine."""
    latest = {r.key(): r.status for r in rows}  # a redone job's last row counts
    failed = {key.folder_name() for key, s in latest.items() if s in status.FAILED}
    done = Pruned()
    for scratch in _scratch_dirs(plans):
        jobs = scratch / "jobs"
        for folder in sorted(jobs.iterdir()) if jobs.is_dir() else []:
            if _job_name(folder.name) in failed:
                done.freed += _remove(folder / "cache") + _cut_files(folder)
                done.kept_failed += 1
            else:
                done.freed += _remove(folder)
                done.removed += 1
        done.freed += _cut_files(scratch, recursive=False)
    return done


def _scratch_dirs(plans: list[CellPlan]) -> list[Path]:
    dirs = [Path(p.scratch_dir) for p in plans] + [Path(p.rival.scratch_dir) for p in plans if p.rival is not None]
    return [d for d in dict.fromkeys(dirs) if d.is_dir()]


def _job_name(folder: str) -> str:
    """A job folder's key name without the suffix of the A/A twin or of a further build (cell_runner.job_folder)."""
    return re.sub(r"-(aa-twin|build\d+)$", "", folder)


def _size(path: Path) -> int:
    if path.is_symlink() or path.is_file():
        return path.lstat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() or p.is_symlink()) if path.is_dir() else 0


def _remove(path: Path) -> int:
    if not path.exists() and not path.is_symlink():
        return 0
    size = _size(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
    return size - (_size(path) if path.exists() else 0)


def _cut_files(folder: Path, recursive: bool = True) -> int:
    """Cut every file over KEEP_BYTES to its last KEEP_BYTES; bytes freed."""
    freed = 0
    for path in folder.rglob("*") if recursive else folder.iterdir():
        try:
            if path.is_symlink() or not path.is_file() or path.stat().st_size <= KEEP_BYTES:
                continue
            size = path.stat().st_size
            with open(path, "r+b") as fh:
                fh.seek(size - KEEP_BYTES)
                last = fh.read()
                fh.seek(0)
                fh.write(last)
                fh.truncate(len(last))
            freed += size - len(last)
        except OSError:
            continue
    return freed


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def describe(done: Pruned, where: str) -> str:
    return (f"scratch {where}: freed {mib(done.freed)} ({done.removed} job folder(s) removed, {done.kept_failed} "
            f"kept for failed rows; policy: {POLICY})")


