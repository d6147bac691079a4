"""Planning: Matrix -> Cells (device x toolchain, minus excludes) -> Jobs (kernel, workload, dtype, backend,
variant). Pure functions over the matrix and the plugin folders; nothing runs, nothing is written."""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from opmatrix.incell import plugins
from opmatrix.matrix import Matrix, MatrixError


@dataclass(frozen=True)
class Job:
    kernel: str
    workload: str
    dtype: str
    backend: str
    variant: str
    timeout_s: float


@dataclass(frozen=True)
class Cell:
    id: str  # "<device>.<toolchain>"
    device: dict
    toolchain: dict
    env_hash: str  # hash of the sorted matrix values that define the environment

    @property
    def session(self) -> str:
        """The nox session (and environment folder) of this cell: reused only on an exact match."""
        return f"cell-{self.device['id']}-{self.toolchain['name']}-{self.env_hash[:10]}"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Cell:
        return cls(**data)


def env_hash(device: dict, toolchain: dict) -> str:
    blob = json.dumps({"device": device, "toolchain": toolchain}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def plan_cells(matrix: Matrix) -> list[Cell]:
    cells = []
    for device in matrix.device:
        for tc in matrix.toolchain:
            if tc.devices is not None and device.id not in tc.devices:
                continue
            if any(_cell_excluded(ex, device.id, tc.name) for ex in matrix.exclude):
                continue
            d, t = device.model_dump(), tc.model_dump()
            cells.append(Cell(id=f"{device.id}.{tc.name}", device=d, toolchain=t, env_hash=env_hash(d, t)))
    return cells


def _cell_excluded(ex, device: str, toolchain: str) -> bool:
    """A cell is dropped only by an exclude that names nothing finer than device/toolchain."""
    finer = (ex.kernel, ex.backend, ex.workload, ex.dtype, ex.variant)
    return not any(finer) and ex.matches(device=device, toolchain=toolchain)


def plan_jobs(matrix: Matrix, cell: Cell) -> list[Job]:
    vendor = cell.device["vendor"]
    kernels_dir = matrix.kernels_dir()
    jobs = []
    for entry in matrix.kernel:
        spec = _spec(matrix, entry.name)
        for workload in entry.workloads.get(vendor, []):
            if workload not in spec.WORKLOADS:
                raise MatrixError(f"{matrix.source}: kernel {entry.name!r}: workloads.{vendor} names "
                                  f"{workload!r}, which {kernels_dir / entry.name / 'spec.py'} does not define; "
                                  f"defined: {', '.join(spec.WORKLOADS)}")
            for dtype in entry.dtypes.get(vendor, []):
                for backend in entry.backends or matrix.backends:
                    path = plugins.impl_path(kernels_dir, entry.name, backend)
                    for variant in plugins.declared_variants(path):
                        values = dict(device=cell.device["id"], toolchain=cell.toolchain["name"],
                                      kernel=entry.name, backend=backend, workload=workload, dtype=dtype,
                                      variant=variant)
                        if any(ex.matches(**values) for ex in matrix.exclude):
                            continue
                        jobs.append(Job(entry.name, workload, dtype, backend, variant,
                                        entry.timeout_s or matrix.run.timeout_s))
    return jobs


def check_plugins(matrix: Matrix) -> None:
    """Fail early, naming the file, when a backend or kernel the matrix uses does not exist."""
    for backend in {b for k in matrix.kernel for b in (k.backends or matrix.backends)}:
        path = matrix.backends_dir() / plugins.module_file(backend)
        if not path.is_file():
            known = sorted(p.stem.replace("_", "-") for p in matrix.backends_dir().glob("*.py")
                           if not p.name.startswith("_"))
            raise MatrixError(f"{matrix.source}: backend {backend!r} has no adapter file {path}; "
                              f"available backends: {', '.join(known)}")
    for entry in matrix.kernel:
        _spec(matrix, entry.name)


def _spec(matrix: Matrix, kernel: str):
    try:
        return plugins.load_spec(matrix.kernels_dir(), kernel)
    except plugins.PluginError as exc:
        known = sorted(p.name for p in matrix.kernels_dir().iterdir() if (p / "spec.py").is_file())
        raise MatrixError(f"{matrix.source}: kernel {kernel!r}: {exc}; kernels available: "
                          f"{', '.join(known)}") from None
