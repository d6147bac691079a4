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
    vendor = cell.device.vendor
    registry = matrix.plugins()
    jobs = []
    for entry in matrix.kernel:
        for workload in entry.workloads.get(vendor, []):
            for dtype in entry.dtypes.get(vendor, []):
                for backend in entry.backends or matrix.backends:
                    path = plugins.impl_path(registry.kernel_dir(entry.name), entry.name, backend)
                    for variant in plugins.declared_variants(path):
                        values = dict(device=cell.device.id, toolchain=cell.toolchain.name, kernel=entry.name,
                                      backend=backend, workload=workload, dtype=dtype, variant=variant)
                        if any(ex.matches(**values) for ex in matrix.exclude):
                            continue
                        params = matrix.defined_params(entry.name, workload) or {}
                        jobs.append(JobSpec(entry.name, workload, dtype, backend, variant,
                                            entry.timeout_s or matrix.run.timeout_s, params=tuple(params.items())))
    return jobs


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
