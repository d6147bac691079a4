"""Planning: Matrix -> cells (device x toolchain, minus excludes) -> jobs (kernel, workload, dtype, backend,
variant) -> one CellPlan per cell. Pure functions over the matrix and the plugin folders; nothing runs, nothing is
written."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from opmatrix import catalog, paths
from opmatrix.core.jobs import (CellPlan, CellSpec, DeviceSpec, JobSpec, RivalCell, Settings,
                                ToolchainSpec)
from opmatrix.incell import compile_cache, plugins
from opmatrix.matrix import Matrix


def env_hash(device: DeviceSpec, toolchain: ToolchainSpec) -> str:
    """The environment's identity: what installs it (ToolchainSpec.install_digest). A device's name, arch,
    description and host-fact ranges choose hosts and label rows; none of them changes what is installed."""
    return toolchain.install_digest(device.vendor)


def device_spec(device) -> DeviceSpec:
    return DeviceSpec(**device.model_dump())


def toolchain_spec(tc) -> ToolchainSpec:
    return ToolchainSpec(name=tc.name, python=tc.python, system=tc.system, installer=tc.installer,
                         packages=tuple(tc.packages), index=dict(tc.index),
                         devices=None if tc.devices is None else tuple(tc.devices), env=dict(tc.env),
                         find_links=tc.find_links)


ACCEPTANCE_SETTINGS = ("baseline", "min_speedup")  # the Settings fields that come from [acceptance]


def settings(matrix: Matrix) -> Settings:
    """The cell's Settings: each field is the [run] key of the same name, or the [acceptance] one; the list of
    fields is written once, in core.jobs.Settings (a field [run] does not have is a mistake, not a silent default)."""
    names = [f.name for f in dataclasses.fields(Settings)]
    missing = [n for n in names if n not in ACCEPTANCE_SETTINGS and n not in type(matrix.run).model_fields]
    if missing:
        raise TypeError(f"core.jobs.Settings fields that matrix.RunSettings does not declare: {', '.join(missing)}")
    return Settings(**{n: getattr(matrix.acceptance if n in ACCEPTANCE_SETTINGS else matrix.run, n) for n in names})


def plan_cells(matrix: Matrix) -> list[CellSpec]:
    cells = []
    for device in matrix.device:
        for tc in matrix.toolchain:
            if tc.devices is not None and device.id not in tc.devices:
                continue
            if any(_cell_excluded(ex, device.id, tc.name) for ex in matrix.exclude):
                continue
            d, t = device_spec(device), toolchain_spec(tc)
            cells.append(CellSpec(id=f"{device.id}.{tc.name}", device=d, toolchain=t, env_hash=env_hash(d, t)))
    return cells


def _cell_excluded(ex, device: str, toolchain: str) -> bool:
    """A cell is dropped only by an exclude that names nothing finer than device/toolchain."""
    finer = (ex.kernel, ex.backend, ex.workload, ex.dtype, ex.variant)
    return not any(finer) and ex.matches(device=device, toolchain=toolchain)


def plan_jobs(matrix: Matrix, cell: CellSpec) -> list[JobSpec]:
    return [job for job, excluded in _all_jobs(matrix, cell) if excluded is None]


def _all_jobs(matrix: Matrix, cell: CellSpec):
    """Every (job, index of the first [[exclude]] that takes it out, or None) of the cell: kernel x workload x
    dtype x backend x each variant the implementation file declares (VARIANTS)."""
    vendor = cell.device.vendor
    registry = matrix.plugins()
    for entry in matrix.kernel:
        for workload in entry.workloads.get(vendor, []):
            for dtype in entry.dtypes.get(vendor, []):
                for backend in entry.backends or matrix.backends:
                    path = plugins.impl_path(registry.kernel_dir(entry.name), entry.name, backend)
                    for variant in plugins.declared_variants(path):
                        values = dict(device=cell.device.id, toolchain=cell.toolchain.name, kernel=entry.name,
                                      backend=backend, workload=workload, dtype=dtype, variant=variant)
                        excluded = next((i for i, ex in enumerate(matrix.exclude) if ex.matches(**values)), None)
                        params = matrix.defined_params(entry.name, workload) or {}
                        yield (JobSpec(entry.name, workload, dtype, backend, variant,
                                       entry.timeout_s or matrix.run.timeout_s, params=tuple(params.items())),
                               excluded)


def job_lines(matrix: Matrix, cell: CellSpec) -> list[str]:
    """What `opmatrix plan` says of a cell's jobs, so that its count adds up: one line per kernel x backend[variant]
    with its number of jobs, its workloads and dtypes, and where it comes from (the implementation file, who
    provides it, and for a variant that the file declares it, not the matrix: every variant in VARIANTS is a job of
    its own); then what each [[exclude]] took out."""
    groups: dict[tuple[str, str, str], list[JobSpec]] = {}
    excluded: dict[int, int] = {}
    for job, ex in _all_jobs(matrix, cell):
        if ex is None:
            groups.setdefault((job.kernel, job.backend, job.variant), []).append(job)
        else:
            excluded[ex] = excluded.get(ex, 0) + 1
    rows = []
    for (kernel, backend, variant), jobs in groups.items():
        label = backend if variant == "default" else f"{backend}[{variant}]"
        rows.append((f"{kernel} x {label}", f"{len(jobs)} job{'s' if len(jobs) > 1 else ''}", _cases(jobs),
                     job_origin(matrix, kernel, backend, variant)))
    widths = [max((len(r[i]) for r in rows), default=0) for i in range(3)]
    lines = [f"  {a:<{widths[0]}}  {b:>{widths[1]}}  {c:<{widths[2]}}  {d}".rstrip() for a, b, c, d in rows]
    for i, n in sorted(excluded.items()):
        ex = matrix.exclude[i]
        keys = " ".join(f"{k}={getattr(ex, k)}" for k in ("device", "toolchain", "kernel", "backend", "workload",
                                                          "dtype", "variant") if getattr(ex, k))
        lines.append(f"  {n} job{'s' if n > 1 else ''} left out by exclude[{i}] ({keys})"
                     + (f": {ex.reason}" if ex.reason else ""))
    return lines


def _cases(jobs: list[JobSpec]) -> str:
    """The workloads and dtypes of jobs: `w1, w2 x float16, bfloat16` when they are every pair of the two, else
    each pair."""
    workloads = list(dict.fromkeys(j.workload for j in jobs))
    dtypes = list(dict.fromkeys(j.dtype for j in jobs))
    if len(jobs) == len(workloads) * len(dtypes):
        return f"{', '.join(workloads)} x {', '.join(dtypes)}"
    return ", ".join(f"{j.workload} {j.dtype}" for j in jobs)


def job_origin(matrix: Matrix, kernel: str, backend: str, variant: str) -> str:
    """Where a kernel x backend[variant] comes from: its implementation file (from the working folder where it lies
    below it) and who provides it (shipped with opmatrix, the project's, an installed package's entry point); for a
    variant, that the file declares it."""
    found = matrix.plugins().kernel(kernel)
    path = plugins.impl_path(found.folder, kernel, backend)
    shown = str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)
    where = f"{shown} ({found.origin})"
    return where if variant == "default" else f"{where}, a variant its VARIANTS declares"


def cell_plans(matrix: Matrix, run_id: str, scratch_root: Path) -> list[CellPlan]:
    """One plan per cell that has jobs; the scratch folder is the run's own (scratch_root/run_id/cell). The cell
    of a [[compare]]'s candidate toolchain rides in the plan of the baseline's cell on the same device (its
    `rival`), so that one cell runner times both in the same rounds. The run id is one path component
    (paths.check_run_id): the scratch never lands outside scratch_root."""
    paths.check_run_id(run_id)
    plans = {}
    for cell in plan_cells(matrix):
        jobs = plan_jobs(matrix, cell)
        if jobs:
            plans[cell.id] = CellPlan(run_id=run_id, cell=cell, jobs=tuple(jobs), settings=settings(matrix),
                                      kernels_dir=str(matrix.kernels_dir()), backends_dir=str(matrix.backends_dir()),
                                      scratch_dir=str(Path(scratch_root) / run_id / cell.id),
                                      compile_cache=str(Path(scratch_root) / compile_cache.FOLDER),
                                      **plugin_dirs(matrix, jobs))
    for compare in matrix.compare:
        for device in matrix.device:
            base, cand = plans.get(f"{device.id}.{compare.baseline}"), plans.get(f"{device.id}.{compare.candidate}")
            if base is None or cand is None:
                continue
            rival = RivalCell(cell=cand.cell, jobs=tuple(dataclasses.replace(j, rival=True) for j in cand.jobs),
                              scratch_dir=cand.scratch_dir)
            plans[base.cell.id] = base.replace(rival=rival)
            del plans[cand.cell.id]
    return list(plans.values())


def plugin_dirs(matrix: Matrix, jobs) -> dict[str, dict[str, str]]:
    """CellPlan's kernel_dirs / backend_dirs: where each kernel and backend of these jobs was found."""
    registry = matrix.plugins()
    return dict(kernel_dirs={k: str(registry.kernel_dir(k)) for k in sorted({j.kernel for j in jobs})},
                backend_dirs={b: str(registry.backend_dir(b)) for b in sorted({j.backend for j in jobs})})


def plugin_lines(matrix: Matrix) -> list[str]:
    """What `opmatrix plan` says of the plugins: each one the matrix names that is not shipped with opmatrix (the
    project's own, an installed package's), and what the project's own overrides."""
    names = ([k.name for k in matrix.kernel], [b for k in matrix.kernel for b in (k.backends or matrix.backends)])
    return matrix.plugins().origins(*names)


def workload_lines(matrix: Matrix) -> list[str]:
    """What `opmatrix plan` says of the workloads the matrix defines by their parameters: each one, and where it
    comes from (a workloads_from file, or the matrix file)."""
    named = {(k.name, w) for k in matrix.kernel for names in k.workloads.values() for w in names}
    lines = []
    for kernel, names in matrix.workload.items():
        for name, params in names.items():
            unused = "" if (kernel, name) in named else "  (no [[kernel]] names it)"
            lines.append(f"  {kernel} {name}: {' '.join(f'{k}={v}' for k, v in params.items())}   from "
                         f"{matrix.workload_origin(kernel, name)}{unused}")
    return ["workloads the matrix defines:", *lines] if lines else []


def check_plugins(matrix: Matrix) -> None:
    """Fail early, naming file, key and allowed names, when the matrix names a backend, kernel, workload, dtype or
    variant that does not exist on disk (opmatrix.catalog)."""
    catalog.check(matrix)
