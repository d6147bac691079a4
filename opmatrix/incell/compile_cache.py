"""Build outcomes kept between runs, as asv skips unchanged work: a device no host has gets its compile-only rows
(`compiles`, `lowers`, `unsupported`) from an earlier run when nothing that decides them changed, instead of
building again; so does a device a host has for its `unsupported` rows (an implementation that refuses the device,
decided in a worker that imports its compiler), while every other job there is built and timed as always. The key
is the job's target and the sources that decide the build:

- the implementation's source digest: the kernel's spec.py, kernels/<kernel>/<backend>.py and the sources beside it
  that carry its name (`plugins.implementation_files`), and the backend adapter file;
- the helpers implementations build with (opmatrix/kit: compile targets, ptxas reports, the CUTLASS build), whose
  edits change what a build makes or says; the rest of the engine only carries the row (edit it and the rows
  stay: `--rebuild` when that is not what you want);
- the cell environment's hash (device and toolchain: the packages the build imports) and this host (its compilers
  and devices: as asv, results are kept per machine);
- the target: device vendor, arch and name, and the job (kernel, workload, dtype, backend, variant).

A reused row says so: `compile_cache` is "cached from RUN" and its reason ends "; cached from RUN" (RUN: the run
that built it); `duration_s` is 0, nothing ran. Failed builds are never kept (they may be the host's passing
trouble). `opmatrix run --rebuild` builds everything again (and keeps the new results). The cache is one JSON file
per key under the scratch (`.opmatrix/compile-cache/`), written atomically. Stdlib only: the cell runner uses it.

Timed jobs are built every run. With `[run] build_cache = "kept"` a timed job's compiler caches (the folder its
backend's `environment(device, cache_dir)` points them at) are kept between runs under the same key
(`.opmatrix/build-cache/<key>/`): an unchanged job compiles warm, and its row's `compile_cache` says "kept from
RUN" (the run that filled it). A job that fails loses its folder; `--rebuild` empties it first.
"""
from __future__ import annotations

import dataclasses
import datetime
import functools
import hashlib
import json
import shutil
import socket
from pathlib import Path
from typing import Callable, Iterable, Iterator

from opmatrix.core import status
from opmatrix.core.jobs import CellPlan, JobSpec, Mode
from opmatrix.core.result import Result, RowError
from opmatrix.incell import atomic, plugins

FOLDER = "compile-cache"  # under the scratch root
BUILD_FOLDER = "build-cache"  # beside it: timed jobs' kept compiler caches ([run] build_cache = "kept")
BUILT_BY = "built-by"  # in a kept folder: the id of the run whose job filled it, written once that job passed
CACHEABLE = {Mode.COMPILE: (*status.BUILD_ONLY, status.UNSUPPORTED), Mode.RUN: (status.UNSUPPORTED,)}
KEY_VERSION = 1  # raise when what a key covers changes
ENGINE_PARTS = ("kit",)  # the part of opmatrix implementations build with


def applies(plan: CellPlan) -> bool:
    """Whether this plan's results can come from, and go to, the cache: one with a cache folder, compile-only or
    timed (not a [[compare]]'s pair of toolchains, whose rows are read side by side)."""
    return plan.mode in CACHEABLE and bool(plan.compile_cache) and plan.rival is None


def key(plan: CellPlan, job: JobSpec) -> str:
    d = plan.cell_of(job).device
    sources = [Path(plan.kernels_dir_of(job)) / job.kernel / "spec.py",
               *plugins.implementation_files(Path(plan.kernels_dir_of(job)), job.kernel, job.backend),
               Path(plan.backends_dir_of(job)) / plugins.module_file(job.backend)]
    parts = [KEY_VERSION, engine_digest(), plan.cell_of(job).env_hash, socket.gethostname(), d.vendor, d.arch, d.name,
             job.kernel, job.workload, job.dtype, job.backend, job.variant, _digest(sources)]
    parts += [list(p) for p in job.params]  # a workload the matrix defines: its parameters (none: as before)
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


@functools.lru_cache(maxsize=1)
def engine_digest() -> str:
    package = Path(__file__).resolve().parents[1]
    return _digest(sorted(p for part in ENGINE_PARTS for p in (package / part).rglob("*.py")))


def _digest(files: Iterable[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"(absent)") + b"\0")
    return digest.hexdigest()


def _file(plan: CellPlan, job: JobSpec) -> Path:
    return Path(plan.compile_cache) / f"{key(plan, job)}.json"


def cached(plan: CellPlan, job: JobSpec) -> Result | None:
    """The job's row from the run that built it, restamped for this run; None when there is none to reuse."""
    path = _file(plan, job)
    try:
        row = Result.from_json(path.read_text())
    except (OSError, ValueError, RowError):  # absent, or damaged: build again
        return None
    if row.status not in CACHEABLE[plan.mode]:
        return None
    note = f"cached from {row.run_id}"
    return dataclasses.replace(row, **plan.identity(job), compile_cache=note, error=f"{row.error}; {note}",
                               duration_s=0.0, started_at=_now())


def remember(plan: CellPlan, row: Result) -> None:
    """Keep a compile-only row of this plan for later runs (cacheable outcomes only)."""
    job = next((j for j in plan.all_jobs() if plan.key(j) == row.key()), None)
    if job is None or row.status not in CACHEABLE[plan.mode] or row.compile_cache.startswith("cached from"):
        return
    path = _file(plan, job)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, row.to_json())


def through(plan: CellPlan, run: Callable[[CellPlan], Iterator[Result]]) -> Iterator[Result]:
    """The plan's rows: those the cache holds (unless plan.rebuild), then `run` of the plan's other jobs, each of
    its rows kept for the next run."""
    reused = {} if plan.rebuild else {job: cached(plan, job) for job in plan.all_jobs()}
    yield from (row for row in reused.values() if row is not None)
    left = [job for job in plan.all_jobs() if reused.get(job) is None]
    if not left:
        return
    rest = plan.with_jobs(left, plan.partners)
    for row in run(rest):
        remember(rest, row)
        yield row


@dataclasses.dataclass(frozen=True)
class KeptBuild:
    """A timed job's compiler-cache folder kept between runs, and the run that filled it ("": none yet)."""

    folder: Path
    built_by: str

    def settle(self, row: Result, run_id: str) -> Result:
        """The job's row once it ended: one that passed says which run's caches it compiled from, or leaves its
        caches for the next run (if it wrote any: a backend that caches nothing is cold every run); one that failed
        leaves nothing (its caches may be the failure)."""
        if row.status != status.OK:
            shutil.rmtree(self.folder, ignore_errors=True)
            return row
        if self.built_by:
            return dataclasses.replace(row, compile_cache=f"kept from {self.built_by}")
        if any(self.folder.iterdir()):
            (self.folder / BUILT_BY).write_text(run_id)
        return row


def kept_build(plan: CellPlan, job: JobSpec) -> KeptBuild | None:
    """The kept cache folder of a timed job under `[run] build_cache = "kept"`, created (emptied first on
    `--rebuild`); None when the plan keeps none: cold builds, compile-only, a [[compare]], no cache folder."""
    if plan.settings.build_cache != "kept" or plan.mode is not Mode.RUN or not applies(plan):
        return None
    folder = Path(plan.compile_cache).parent / BUILD_FOLDER / key(plan, job)
    marker = folder / BUILT_BY
    built_by = marker.read_text().strip() if marker.is_file() and not plan.rebuild else ""
    if not built_by:  # never filled, a job that did not pass left it, or --rebuild: start it empty
        shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    return KeptBuild(folder, built_by)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
