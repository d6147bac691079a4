"""The plan as typed records: what a cell is, which jobs it runs, and what one worker is asked to do.

These cross every process boundary of a run (driver -> Ray task -> nox -> cell runner -> worker) as JSON, and are
serialised here and nowhere else (`to_json` / `from_json`). A job is identified by one key, `JobKey`; a result row
for a job that never reached a worker is built in one place, `CellPlan.row`. Stdlib only: the cell runner and the
worker import this inside cell environments that hold nothing but the kernel's framework.
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from opmatrix.core.acceptance import DEFAULT_BASELINE, DEFAULT_MIN_SPEEDUP
from opmatrix.core.keys import JobKey
from opmatrix.core.result import Result


class Mode(str, enum.Enum):
    """What a cell does with its jobs."""

    RUN = "run"  # on a host that has the device: build, check, time
    COMPILE = "compile"  # no host has the device: build (or lower) for it on a CPU host, never run
    PREPARE = "prepare"  # build the cell's environment and say how to start Python in it (a rival's cell)


@dataclass(frozen=True)
class DeviceInfo:
    """The device as backends and implementations see it (arch resolved from the host when the matrix says
    'auto')."""

    id: str
    vendor: str
    arch: str
    name: str = ""

    @property
    def torch(self) -> str:
        """The torch device string: ROCm builds of torch expose AMD GPUs as 'cuda' too."""
        return "cpu" if self.vendor == "cpu" else "cuda"

    @property
    def is_gpu(self) -> bool:
        return self.vendor != "cpu"


HOST_FACTS = ("driver", "runtime")  # what a device may constrain of its hosts beyond the GPU model (version ranges)


@dataclass(frozen=True)
class DeviceSpec:
    """A matrix [[device]]."""

    id: str
    vendor: str
    arch: str
    name: str = ".*"
    fallback: bool = False
    description: str = ""
    driver: str | None = None  # host facts it accepts (version ranges): hosts outside them are not this device
    runtime: str | None = None
    host: str | None = None  # regular expression on the host's name

    def describe(self) -> str:
        facts = "".join(f", {k} {getattr(self, k)}" for k in HOST_FACTS if getattr(self, k))
        return f"{self.vendor} {self.arch}, name ~ /{self.name}/{facts}" + (f", host ~ /{self.host}/" if self.host
                                                                            else "")


@dataclass(frozen=True)
class ToolchainSpec:
    """A matrix [[toolchain]]: how a cell's environment is built."""

    name: str
    python: str | None = None
    system: bool = False
    installer: str = "pip"
    packages: tuple[str, ...] = ()
    index: dict[str, str] = field(default_factory=dict)
    devices: tuple[str, ...] | None = None
    env: dict[str, str] = field(default_factory=dict)
    find_links: str | None = None  # a local folder of wheels (pip --find-links)

    def install_digest(self, vendor: str) -> str:
        """The identity of the environment this toolchain makes for a vendor's devices: what installs it (Python,
        installer, packages, that vendor's index, local wheels) and the variables its cells run with. Not its name,
        the devices it serves, nor anything of a device but its vendor: editing those rebuilds nothing."""
        return digest({"vendor": vendor, "index": self.index.get(vendor),
                       **{name: getattr(self, name) for name in INSTALL_FIELDS}})


INSTALL_FIELDS = ("python", "system", "installer", "packages", "env", "find_links")  # ToolchainSpec.install_digest


VARYING_BUILDS = 2  # [run] builds = 0 (the default): builds of a contestant whose builds vary (Settings.builds_of)
# A GPU call shorter than this (ms) is launch-bound: its time is the process's own launch path (where the CPU sits, how
# its interpreter and driver were laid out), drawn once per worker. Two identical H100 runs put rmsnorm decode
# torch[llama] (~11 us) at 0.20x [0.15, 0.26] and 0.35x [0.31, 0.38] (reports/20261207-h100-decide-pair-a, -b): by
# default such a contestant is timed in two workers, so its interval holds that draw.
SHORT_CALL_MS = 0.02


@dataclass(frozen=True)
class Settings:
    """The matrix [run] settings a cell runner and its workers use."""

    trials: int = 3
    warmup_ms: float = 25
    rep_ms: float = 100
    cuda_graph_below_ms: float = 0.05
    crosscheck: bool = False
    compile_only: bool = True
    rounds: int = 10
    max_rounds: int = 30
    round_extra_s: float = 60
    burst_ms: float = 20
    burst_warmup_ms: float = 5
    burst_sets: int = 32  # the most calls a burst holds: each call gets buffers and fresh contents of its own
    burst_calls: int = 0  # a burst holds at least this many timed calls (within burst_sets)
    noise_target: float = 0  # extra rounds while the A/A interval's half-width is above this fraction (0: off)
    builds: int = 0  # independent builds of every contestant but the baseline, timed in the same rounds (0: auto)
    build_cache: str = "cold"  # "cold": each job compiles from an empty cache; "kept": its caches kept between runs
    ceilings_kept_h: float = 24  # a host's measured ceilings serve its later cells this long (0: every cell measures)
    cpu_threads: int = 1  # a CPU cell's OMP_NUM_THREADS, where its toolchain sets none (0: leave it unset)
    baseline: str = DEFAULT_BASELINE  # acceptance.baseline: in every round, with its A/A twin
    min_speedup: float = DEFAULT_MIN_SPEEDUP  # acceptance.min_speedup: more rounds while an interval straddles it
    # after its rounds, each GPU contestant's call once more in a process of its own (opmatrix.incell.gpu_tools):
    profile: str = "none"  # "ncu": under Nsight Compute, its summary in the row and the .ncu-rep in the run folder
    sanitize: bool = False  # under compute-sanitizer memcheck, racecheck and initcheck; a finding: `unsafe`

    def builds_of(self, varies: bool) -> int:
        """How many builds a contestant gets: `builds` where the matrix sets it; by default (0) VARYING_BUILDS for
        one whose builds vary (an autotuner's choice, torch.compile's generated code, a launch-bound call's process:
        SHORT_CALL_MS), so its interval carries that variation, and one for the rest."""
        return self.builds or (VARYING_BUILDS if varies else 1)


@dataclass(frozen=True)
class CellSpec:
    """One device x toolchain. Its environment is reused only on an exact match of env_hash."""

    id: str  # "<device>.<toolchain>"
    device: DeviceSpec
    toolchain: ToolchainSpec
    env_hash: str

    @property
    def session(self) -> str:
        """The nox session (and environment folder) of this cell."""
        return f"cell-{self.device.id}-{self.toolchain.name}-{self.env_hash[:10]}"


@dataclass(frozen=True)
class JobSpec:
    kernel: str
    workload: str
    dtype: str
    backend: str
    variant: str
    timeout_s: float
    rival: bool = False  # a job of the plan's rival cell (the candidate toolchain of a [[compare]])
    # a workload the matrix defines ([workload.<kernel>.<name>]): its parameters, (name, value) pairs; () for one
    # of the spec's WORKLOADS, looked up by name in the cell
    params: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "params", tuple((str(k), v) for k, v in self.params))  # JSON gives lists

    @property
    def contest(self) -> tuple[str, str, str]:
        """(kernel, workload, dtype): the jobs that contest together, built side by side and timed in the same
        rounds; the one place this group is defined."""
        return (self.kernel, self.workload, self.dtype)


def baseline_job(jobs, baseline: str) -> JobSpec | None:
    """The job every other job of one (kernel, workload, dtype) is paired with: the baseline backend's `default`
    variant (its first variant if it declares no default), never a candidate toolchain's job. The baseline
    backend's other variants (torch[math], torch[cudnn]) are contestants like any other."""
    own = [j for j in jobs if j.backend == baseline and not j.rival]
    return next((j for j in own if j.variant == "default"), own[0] if own else None)


@dataclass(frozen=True)
class RivalCell:
    """The candidate toolchain's cell of a [[compare]], on the same device: its workers are started from its own
    environment (`python`, `env`, filled in once that environment is built) and timed in the same rounds as the
    baseline toolchain's, by one cell runner. Its scratch (compile caches included) is its own."""

    cell: CellSpec
    jobs: tuple[JobSpec, ...]
    scratch_dir: str
    python: str = ""
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CellPlan:
    """Everything one cell runner needs: the cell, its jobs, the settings and where things are."""

    run_id: str
    cell: CellSpec
    jobs: tuple[JobSpec, ...]
    settings: Settings
    kernels_dir: str
    backends_dir: str
    scratch_dir: str
    mode: Mode = Mode.RUN
    deadline: float | None = None  # seconds since the epoch; no job starts after it
    gpu_index: str = ""
    # --resume: baseline jobs run again only so that resumed contestants are paired with them; no row of theirs
    partners: tuple[JobSpec, ...] = ()
    rival: RivalCell | None = None  # a [[compare]]: the candidate toolchain, timed in the same rounds
    # where each kernel / backend of the plan was found (the project's folder, the package's, an installed
    # package's: opmatrix.incell.plugins.Registry), name -> folder; a name not listed is in kernels_dir / backends_dir
    kernel_dirs: dict[str, str] = field(default_factory=dict)
    backend_dirs: dict[str, str] = field(default_factory=dict)
    compile_cache: str = ""  # compile-only rows kept between runs (opmatrix.incell.compile_cache); "": none
    rebuild: bool = False  # build again what that cache holds (`opmatrix run --rebuild`)
    # where [run] profile = "ncu" writes its Nsight Compute reports: the run folder's profiles/, on the host that runs
    # the cell ("": the cell's scratch)
    profile_dir: str = ""

    def kernels_dir_of(self, job: JobSpec) -> str:
        """The folder that holds this job's kernel folder."""
        return self.kernel_dirs.get(job.kernel, self.kernels_dir)

    def backends_dir_of(self, job: JobSpec) -> str:
        """The folder that holds this job's backend adapter file."""
        return self.backend_dirs.get(job.backend, self.backends_dir)

    @property
    def session(self) -> str:
        """The nox session this plan runs in. Compile-only cells of one toolchain and vendor share one environment:
        what is built for a device no host has does not depend on which device it is."""
        if self.mode is Mode.COMPILE:
            tc = self.cell.toolchain
            return f"compile-{self.cell.device.vendor}-{tc.name}-{tc.install_digest(self.cell.device.vendor)[:10]}"
        return self.cell.session

    def cell_of(self, job: JobSpec) -> CellSpec:
        return self.rival.cell if job.rival and self.rival else self.cell

    def all_jobs(self) -> tuple[JobSpec, ...]:
        """This cell's jobs and its rival's."""
        return self.jobs + (self.rival.jobs if self.rival else ())

    def key(self, job: JobSpec) -> JobKey:
        return JobKey(self.cell_of(job).id, job.kernel, job.workload, job.dtype, job.backend, job.variant)

    def identity(self, job: JobSpec) -> dict[str, Any]:
        """The fields that say which job a result row belongs to."""
        cell = self.cell_of(job)
        device = cell.device
        return dict(run_id=self.run_id, cell=cell.id, device=device.id, toolchain=cell.toolchain.name,
                    env_hash=cell.env_hash, vendor=device.vendor, arch=device.arch, gpu_index=self.gpu_index,
                    kernel=job.kernel, workload=job.workload, dtype=job.dtype, backend=job.backend,
                    variant=job.variant)

    def row(self, job: JobSpec, status: str, error: str) -> Result:
        """A result row for a job of this cell with the given status: the one way such a row is made."""
        return Result(**self.identity(job), status=status, error=error)

    def past_deadline(self) -> bool:
        return self.deadline is not None and time.time() >= self.deadline

    def replace(self, **changes) -> CellPlan:
        return dataclasses.replace(self, **changes)

    def to_json(self) -> str:
        return json.dumps(_plain(self), sort_keys=True)

    def with_jobs(self, jobs, partners: tuple[JobSpec, ...] = ()) -> CellPlan:
        """The same plan for only these jobs (its own and its rival's, told apart by `JobSpec.rival`)."""
        own, theirs = tuple(j for j in jobs if not j.rival), tuple(j for j in jobs if j.rival)
        rival = dataclasses.replace(self.rival, jobs=theirs) if self.rival is not None and theirs else None
        return self.replace(jobs=own, partners=tuple(partners), rival=rival)

    def without_rival(self) -> list[CellPlan]:
        """The plan and its rival as two plain plans (where they are not timed together: compile-only, no host)."""
        if self.rival is None:
            return [self]
        rival = self.replace(cell=self.rival.cell, jobs=tuple(dataclasses.replace(j, rival=False)
                                                             for j in self.rival.jobs),
                             scratch_dir=self.rival.scratch_dir, partners=(), rival=None)
        return [self.replace(rival=None), rival]

    @classmethod
    def from_json(cls, text: str) -> CellPlan:
        data = json.loads(text)
        rival = data.get("rival")
        return cls(**dict(
            data, cell=_cell(data["cell"]), jobs=tuple(JobSpec(**j) for j in data["jobs"]),
            settings=Settings(**data["settings"]), partners=tuple(JobSpec(**j) for j in data.get("partners", ())),
            mode=Mode(data["mode"]),
            rival=None if rival is None else RivalCell(**dict(rival, cell=_cell(rival["cell"]),
                                                              jobs=tuple(JobSpec(**j) for j in rival["jobs"])))))


def _cell(data: dict) -> CellSpec:
    tc = data["toolchain"]
    toolchain = ToolchainSpec(**dict(tc, packages=tuple(tc["packages"]),
                                     devices=None if tc["devices"] is None else tuple(tc["devices"])))
    return CellSpec(id=data["id"], device=DeviceSpec(**data["device"]), toolchain=toolchain,
                    env_hash=data["env_hash"])


@dataclass(frozen=True)
class WorkerTask:
    """What one worker process is asked to do. `attempt` is unique to this start of the worker (its log names it)."""

    job: JobSpec
    mode: Mode
    device: DeviceInfo
    kernels_dir: str
    backends_dir: str
    settings: Settings
    attempt: str
    workload: dict[str, Any] = field(default_factory=dict)  # the workload's parameters, as build() receives them
    cache_dir: str = ""  # the job's compiler caches: the backend's environment(device, cache_dir) points them here
    pinned_env: dict[str, str] = field(default_factory=dict)  # what the toolchain pins: no contestant may change it

    def to_json(self) -> str:
        return json.dumps(_plain(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> WorkerTask:
        data = json.loads(text)
        return cls(**dict(data, job=JobSpec(**data["job"]), mode=Mode(data["mode"]),
                          device=DeviceInfo(**data["device"]), settings=Settings(**data["settings"])))


def digest(*parts) -> str:
    """A stable hash of plain values and records (environment identities)."""
    return hashlib.sha256(json.dumps(_plain(parts), sort_keys=True).encode()).hexdigest()


def _plain(obj) -> Any:
    """Dataclasses, enums and tuples as JSON-ready values."""
    if dataclasses.is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj
