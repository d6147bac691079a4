"""Matrix files: load a TOML file and validate it into a `Matrix`.

A matrix file is input from whoever wrote it, so everything in it that reaches pip, nox or a timer is checked
here, before any work: package strings must be PEP 508 requirements (never pip options or shell text), index URLs
http(s) with a host, Python versions ones that exist, numbers finite and within sane bounds, names unique and
cross-references pointing at something. What needs the plugin folders (backends, workloads, dtypes, variants) is
checked by `opmatrix.catalog.check`.

Every error names the file, the key (as a path such as `toolchain[1].packages[0]`), the value and what is
allowed, so a user can fix the file without reading this code.
"""
from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError,
                      field_validator, model_validator)

from opmatrix import matrix_checks as checks
from opmatrix import matrix_workloads, paths
from opmatrix.core import acceptance as criteria
from opmatrix.core.acceptance import DEFAULT_BASELINE, DEFAULT_MIN_SPEEDUP
from opmatrix.core.jobs import Settings
from opmatrix.incell.plugins import Registry, discover
from opmatrix.matrix_checks import EXCLUDE_KEYS, IDENT, NAME_MAX, NO_VALUE, Problem  # noqa: F401 (re-exported)

Vendor = Literal["nvidia", "amd", "cpu"]
VENDORS = ("nvidia", "amd", "cpu")
BACKEND = r"^[a-z0-9][a-z0-9_-]*$"  # a file name under backends/: no dots, no slashes
ARCH = r"^[A-Za-z0-9][A-Za-z0-9_.:+-]*$"  # sm_90, gfx942:sramecc+:xnack-, x86_64, auto
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
MAX_FILE_BYTES = 1 << 20


class MatrixError(Exception):
    """A matrix file is missing, unreadable or invalid. The message says where and how to fix it."""


PROBLEMS_SHOWN = 30  # a file with thousands of mistakes lists the first ones and counts the rest


def fail(source: str | Path, problems: list[Problem], what: str = "the matrix file") -> MatrixError:
    """The MatrixError listing the problems, one per line (the first PROBLEMS_SHOWN, then how many more)."""
    lines = [f"{source}: {len(problems)} problem(s) in {what}"]
    for p in problems[:PROBLEMS_SHOWN]:
        shown = "" if p.value is NO_VALUE else f" = {_short(p.value)}"
        lines.append(f"  {p.key}{shown}: {p.message}")
    if len(problems) > PROBLEMS_SHOWN:
        lines.append(f"  ... and {len(problems) - PROBLEMS_SHOWN} more (fix these first, then run again)")
    return MatrixError("\n".join(lines))


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."


Requirement508 = Annotated[str, AfterValidator(checks.requirement)]
IndexUrl = Annotated[str, AfterValidator(checks.index_url)]
VersionRange = Annotated[str, AfterValidator(checks.version_range)]
Backend = Annotated[str, Field(pattern=BACKEND, max_length=NAME_MAX)]
SECONDS = dict(gt=0, le=86400, allow_inf_nan=False)  # a job's timeout: at most a day
MILLIS = dict(le=60000, allow_inf_nan=False)  # warm-up or timed repetitions: at most a minute


class _Model(BaseModel):
    # strict: TOML is typed, so "300" for a number or true for a count is a mistake, not something to coerce
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Device(_Model):
    id: str = Field(pattern=IDENT, max_length=NAME_MAX,
                    description="the device's name in this file; a cell is <device>.<toolchain>")
    vendor: Vendor = Field(description="which of a kernel's workloads and dtypes apply, and how it is timed")
    arch: str = Field(pattern=ARCH, description="sm_90, gfx942, x86_64 ... or 'auto' to take the host's")
    name: str = Field(".*", description="regular expression matched against the host's GPU product name")
    fallback: bool = Field(False, description="claim a host GPU only when no other device of the matrix does")
    driver: VersionRange | None = Field(None, description="the host GPU driver versions this device accepts, e.g. "
                                        "'>=590,<600' (NVIDIA) or '>=6.12' (AMD); hosts outside it are not this device")
    runtime: VersionRange | None = Field(None, description="the CUDA or ROCm versions the host's driver offers that "
                                         "this device accepts, e.g. '13.*' or '>=6.4'")
    host: str | None = Field(None, description="regular expression matched against the host's name: a device of "
                             "chosen hosts (a second baseline host for a host A/A, say)")
    description: str = Field("", description="free text, shown in reports")

    @model_validator(mode="after")
    def _facts_need_a_gpu(self) -> Device:
        if self.vendor == "cpu" and (self.driver or self.runtime):
            raise ValueError("a cpu device has no GPU driver or runtime to constrain; drop driver / runtime, or set "
                             "vendor to nvidia or amd")
        return self

    @field_validator("name", "host")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression ({exc})") from None
        return value


class Toolchain(_Model):
    name: str = Field(pattern=IDENT, max_length=NAME_MAX, description="the toolchain's name in this file")
    python: Annotated[str, AfterValidator(checks.python)] | None = Field(
        None, description="'3.11' or an absolute interpreter path; default: the host's python")
    system: bool = Field(False, description="layer the cell's packages over the host interpreter's own packages")
    installer: Literal["pip", "uv"] = Field("pip", description="what installs the cell's packages")
    # before `packages`, which reads it; left out of dumps so that existing environment hashes stay the same
    allow_urls: bool = Field(False, exclude=True, description="allow 'name @ URL' direct references in packages")
    packages: list[Requirement508] = Field([], description="PEP 508 requirements installed into the cell's "
                                           "environment (pip options refused; URLs only with allow_urls)")
    index: dict[Vendor, IndexUrl] = Field({}, description="extra package index per device vendor")
    find_links: Annotated[str, AfterValidator(checks.local_folder)] | None = Field(
        None, description="an absolute path to a local folder of wheels pip may install from (--find-links): a "
        "package index of your own builds, or of versions to bisect; it must exist wherever the cell is built")
    devices: list[str] | None = Field(None, description="device ids this toolchain applies to (default: all)")
    env: dict[Annotated[str, Field(pattern=ENV_NAME)], Annotated[str, AfterValidator(checks.env_value)]] = Field(
        {}, description="environment variables of the cell's processes (names: letters, digits, _)")


class KernelEntry(_Model):
    name: str = Field(pattern=IDENT, max_length=NAME_MAX,
                      description="a kernel folder <name>/ (the project's kernels/, a package's or "
                      "built in)")
    workloads: dict[Vendor, list[str]] = Field(description="per device vendor, names from the spec's WORKLOADS or "
                                               "the matrix's [workload.<kernel>] tables")
    dtypes: dict[Vendor, list[str]] = Field(description="per device vendor, the dtypes to run")
    backends: list[Backend] | None = Field(None, description="this kernel's backends (default: the matrix's)")
    timeout_s: float | None = Field(None, **SECONDS, description="this kernel's per-job limit (default: "
                                    "[run] timeout_s)")


class Exclude(_Model):
    device: str | None = None
    toolchain: str | None = None
    kernel: str | None = None
    backend: str | None = None
    workload: str | None = None
    dtype: str | None = None
    variant: str | None = None
    reason: str = Field("", description="why, for whoever reads the matrix and its plan")

    @model_validator(mode="after")
    def _not_empty(self) -> Exclude:
        if not any(getattr(self, k) for k in EXCLUDE_KEYS):
            raise ValueError(f"an exclude needs at least one of {', '.join(EXCLUDE_KEYS)}")
        return self

    def matches(self, **values: str) -> bool:
        """True when every key this exclude sets equals the given value (keys not given never match)."""
        return all(getattr(self, k) is None or values.get(k) == getattr(self, k) for k in EXCLUDE_KEYS)


class Compare(_Model):
    """A toolchain upgrade to judge: the candidate's cells are timed in the same rounds as the baseline's, on the
    same device, by one cell runner (`opmatrix compare` reads the result)."""

    baseline: str = Field(description="toolchain name: what runs today")
    candidate: str = Field(description="toolchain name: the upgrade (torch, Triton, TileLang, Python, index ...)")


class CompareHosts(_Model):
    """A driver (or runtime) canary: the candidate device's hosts against the baseline device's, both timed in one
    run, compared unpaired across hosts with a host A/A (opmatrix.upgrade.cross_host; written with comparison.md)."""

    baseline: str = Field(description="device id: the hosts on today's driver")
    candidate: str = Field(description="device id: the canary hosts")
    host_aa: str | None = Field(None, description="device id: today's driver on a second baseline host; its "
                                "difference from the first (the host A/A) raises each row's threshold")
    toolchain: str | None = Field(None, description="the toolchain compared (default: the matrix's only one)")


RUN_DEFAULTS = Settings()  # the [run] keys a cell runner reads take their defaults from here


class RunSettings(_Model):
    timeout_s: float = Field(900, **SECONDS, description="per job (kernel x workload x dtype x backend x variant)")
    trials: int = Field(RUN_DEFAULTS.trials, ge=3, le=1000,
                        description="correctness trials, each with fresh random inputs")
    warmup_ms: float = Field(RUN_DEFAULTS.warmup_ms, ge=0, **MILLIS,
                             description="warm-up of the views timed outside the rounds "
                             "(second timing, CUDA graph, cross-check)")
    rep_ms: float = Field(RUN_DEFAULTS.rep_ms, gt=0, **MILLIS, description="timing budget of those views")
    cuda_graph_below_ms: float = Field(RUN_DEFAULTS.cuda_graph_below_ms, ge=0, **MILLIS,
                                       description="GPU rows whose event median is below this "
                                       "are also timed by CUDA-graph replay (graph_median_ms); 0 turns it off")
    crosscheck: bool = Field(RUN_DEFAULTS.crosscheck,
                             description="time each GPU row also from CUPTI kernel records "
                             "(torch.profiler) and record the agreement with the event median")
    rounds: int = Field(RUN_DEFAULTS.rounds, ge=10, le=1000,
                        description="paired timing: rounds in which every contestant of a "
                        "(kernel, workload, dtype) is timed once, shuffled, the baseline and its A/A twin in each; "
                        "at least 10, so that a significance test can succeed at all")
    max_rounds: int = Field(RUN_DEFAULTS.max_rounds, ge=10, le=10000,
                            description="extra rounds while a ratio's interval straddles "
                            "acceptance.min_speedup, up to this many in all")
    round_extra_s: float = Field(RUN_DEFAULTS.round_extra_s, ge=0, le=86400, allow_inf_nan=False,
                                 description="time budget for those extra rounds, per "
                                 "(kernel, workload, dtype)")
    burst_ms: float = Field(RUN_DEFAULTS.burst_ms, gt=0, **MILLIS,
                            description="timing budget of one contestant's burst in a round")
    burst_warmup_ms: float = Field(RUN_DEFAULTS.burst_warmup_ms, ge=0, **MILLIS,
                                   description="warm-up calls at the start of each burst, this long (at most a "
                                   "quarter of the burst): checked like the others, their times left out")
    burst_sets: int = Field(RUN_DEFAULTS.burst_sets, ge=1, le=4096,
                            description="the most calls one burst holds: every call of a burst gets input "
                            "buffers of its own, filled by the judge with contents no call has seen (fewer where "
                            "that many sets of buffers per worker do not fit in half the free memory)")
    burst_calls: int = Field(RUN_DEFAULTS.burst_calls, ge=0, le=10000,
                             description="at least this many timed calls per burst (within burst_sets): a "
                             "contestant whose call is slow gets a longer burst than burst_ms, so a burst averages "
                             "over the power state's swings, not a handful of calls; 0: off")
    noise_target: float = Field(RUN_DEFAULTS.noise_target, ge=0, le=0.5, allow_inf_nan=False,
                                description="extra rounds (within max_rounds "
                                "and round_extra_s) while the A/A interval's half-width, as a fraction, is above "
                                "this: 0.01 asks for a noise floor of +-1 %; 0: off")
    builds: int = Field(RUN_DEFAULTS.builds, ge=0, le=8,
                        description="paired timing: build every contestant but the baseline this "
                        "many times, each in its own worker with an empty cache, all timed in the same rounds; with "
                        "2 or more a speed-up's interval includes the variation between builds (an autotuner's "
                        "choice, generated code, buffer placement), which the rounds of one build cannot show; 0: "
                        "two builds of a contestant whose builds vary (its backend declares BUILDS_VARY, as "
                        "torch.compile's does, its build was autotuned, or its GPU call takes under 20 us: a "
                        "launch-bound call's time is its process's), one of the others")
    build_cache: Literal["cold", "kept"] = Field(
        RUN_DEFAULTS.build_cache, description="timed jobs' compiler caches: \"cold\" compiles every job from an "
        "empty cache of its own, so compile_s is a first build's; \"kept\" keeps each job's caches between runs, "
        "keyed as compile-only rows are (sources, environment, host, target), so an unchanged job compiles warm "
        "and its row says \"kept from RUN\" (a first look's speed, not a compile-time measurement); "
        "`opmatrix run --rebuild` starts them cold again")
    ceilings_kept_h: float = Field(RUN_DEFAULTS.ceilings_kept_h, ge=0, le=8760, allow_inf_nan=False,
                                   description="hours a host's measured ceilings (the roofline every row is "
                                   "held against) serve later cells of the same device, driver, runtime and torch "
                                   "on it instead of being measured again; a row so served says when they were "
                                   "measured (ceilings_kept); 0 measures them in every cell")
    cpu_threads: int = Field(RUN_DEFAULTS.cpu_threads, ge=0, le=1024,
                             description="threads each worker of a CPU cell runs with (OMP_NUM_THREADS), where the "
                             "toolchain's env sets none: one per worker keeps a shared machine's timings steady "
                             "(measured: rounds within +-3-12 % instead of 0.07-40x with two threads under load), and "
                             "the judge holds every worker to it; 0 leaves the variable unset (every core)")
    kernels_dir: str | None = Field(None, description="the project's kernels folder, relative to the matrix file "
                                    "(default: the nearest kernels/ at or above it); added to the built-in kernels")
    backends_dir: str | None = Field(None, description="the same for backend adapters (backends/)")
    compile_only: bool = Field(RUN_DEFAULTS.compile_only,
                               description="for devices no host has, build (or lower) each kernel for them "
                               "on a CPU host and report compiles / lowers")
    profile: Literal["none", "ncu"] = Field(
        RUN_DEFAULTS.profile, description="\"ncu\": after its rounds, each GPU contestant's call once more in a "
        "process of its own under Nsight Compute (--clock-control none; sections SpeedOfLight, Occupancy, "
        "LaunchStats, WarpStateStats): the row keeps a summary (kernel time, SM and memory throughput as % of peak, "
        "achieved occupancy, top stall reason, registers, shared memory, kernels per call) and the full .ncu-rep is "
        "written to the run folder's profiles/; a cell where it cannot run (no GPU, ROCm, ncu not found, counters "
        "refused) says why in the row; `opmatrix run --profile ncu` asks the same")
    sanitize: bool = Field(RUN_DEFAULTS.sanitize,
                           description="after its rounds, each GPU contestant's call once under compute-sanitizer "
                           "memcheck, racecheck and initcheck, each in a process of its own with every tensor its own "
                           "cudaMalloc (PYTORCH_NO_CUDA_MEMORY_CACHING=1); a finding makes the row `unsafe` (never "
                           "adopted), the first finding its reason; `opmatrix run --sanitize` asks the same")


class Acceptance(_Model):
    baseline: Backend = Field(DEFAULT_BASELINE, description="the framework backend every contestant is timed "
                              "against, in every round, beside its A/A twin")
    min_speedup: float = Field(DEFAULT_MIN_SPEEDUP, gt=0, le=100, allow_inf_nan=False,
                               description="a backend must beat the baseline by this to be adopted")
    max_rel_err: float | None = Field(None, gt=0, allow_inf_nan=False, description="a ceiling on ||out - ref|| / "
                                      "||ref|| for adopting, beyond each kernel's own tolerance")

    def record(self) -> criteria.Acceptance:
        """The validated table as the record a run carries to its report (run.json, the verdicts, the comparisons)."""
        return criteria.Acceptance(self.baseline, self.min_speedup, self.max_rel_err)


class Matrix(_Model):
    name: str = Field(pattern=IDENT, max_length=NAME_MAX,
                      description="default: the file's name; a run's default id ends with it")
    description: str = Field("", description="free text, shown in reports")
    run: RunSettings = RunSettings()
    acceptance: Acceptance = Acceptance()
    backends: list[Backend]
    device: list[Device] = Field(min_length=1)
    toolchain: list[Toolchain] = Field(min_length=1)
    kernel: list[KernelEntry] = Field(min_length=1)
    exclude: list[Exclude] = []
    compare: list[Compare] = []
    compare_hosts: list[CompareHosts] = Field([], description="driver canaries: a device's hosts against another's")
    workloads_from: Annotated[list[str], BeforeValidator(lambda v: [v] if isinstance(v, str) else v)] = Field(
        [], description="workloads files (a path, or a list of paths, relative to this file) whose "
        "[workload.<kernel>.<name>] tables are merged into this file's: `opmatrix profile` writes "
        "reports/<run-id>/workloads.toml, the shapes the model called each kernel with")
    workload: dict[str, dict[str, dict[str, int | float | bool | str]]] = Field(
        {}, description="workloads this file defines by their parameters, [workload.<kernel>.<name>] with the "
        "parameters the kernel spec's WORKLOADS take (checked against the spec); a [[kernel]] names them in its "
        "workloads like the spec's own")
    source: str = ""  # the file it was read from; set by load_matrix
    _registry: Registry | None = PrivateAttr(None)  # plugins(), found once
    _workload_origins: dict[tuple[str, str], str] = PrivateAttr(default_factory=dict)  # set by load_matrix

    def problems(self) -> list[Problem]:
        """What the schema cannot see: repeated names and references to names this file does not define."""
        return checks.cross_references(self)

    def devices(self) -> dict[str, Device]:
        return {d.id: d for d in self.device}

    def defined_params(self, kernel: str, workload: str) -> dict | None:
        """The parameters of a workload this file (or a workloads_from file) defines; None: the spec's own."""
        return self.workload.get(kernel, {}).get(workload)

    def workload_origin(self, kernel: str, workload: str) -> str:
        """Where a defined workload comes from: the workloads_from file as named, or the matrix file's name."""
        return self._workload_origins.get((kernel, workload), Path(self.source).name)

    def workload_files(self) -> list[Path]:
        """The workloads files `workloads_from` names, resolved against this file's folder."""
        return [matrix_workloads.fragment_path(Path(self.source), text) for text in self.workloads_from]

    def kernels_dir(self) -> Path:
        return self._dir(self.run.kernels_dir, paths.KERNELS, paths.BUILTIN_KERNELS)

    def backends_dir(self) -> Path:
        return self._dir(self.run.backends_dir, paths.BACKENDS, paths.BUILTIN_BACKENDS)

    def _dir(self, value: str | None, default: Path, builtin: Path) -> Path:
        """The project's own folder (`_project`), else the one shipped in the package."""
        return self._project(value, default) or builtin

    def _project(self, value: str | None, default: Path) -> Path | None:
        """[run] kernels_dir / backends_dir relative to the matrix file; unset: the nearest folder of that name
        at or above the matrix file's own (a project laid out like this one: matrix/, kernels/, backends/), else
        the project's (opmatrix.paths); None when there is none. So a matrix works from an installed opmatrix."""
        if value is not None:
            return (Path(self.source).resolve().parent / value).resolve() if self.source else Path(value).resolve()
        here = Path(self.source).resolve().parent if self.source else None
        found = next((d / default.name for d in (here, *here.parents) if (d / default.name).is_dir()), None) \
            if here else None
        return found or (default if default.is_dir() else None)

    def plugins(self) -> Registry:
        """The kernels and backends this matrix can name: shipped, registered by installed packages (entry points)
        and the project's own, which win by name (opmatrix.incell.plugins). Found once per matrix."""
        if self._registry is None:
            self._registry = discover(paths.BUILTIN_KERNELS, paths.BUILTIN_BACKENDS,
                                      self._project(self.run.kernels_dir, paths.KERNELS),
                                      self._project(self.run.backends_dir, paths.BACKENDS))
        return self._registry


def load_matrix(path: str | Path) -> Matrix:
    """Read and validate a matrix file; raise MatrixError naming file, key and the fix.

    Checks the file on its own. `opmatrix.catalog.check(matrix)` checks its names against the plugin folders."""
    path = Path(path)
    text = _read(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MatrixError(f"{path}: not valid TOML: {exc}") from None
    if "source" in data:
        raise fail(path, [Problem("source", data["source"], f"unknown key; allowed here: {_keys(())}")])
    data.setdefault("name", re.sub(r"[^a-z0-9_.-]", "-", path.stem.lower()))
    data["source"] = str(path.resolve())
    try:
        origins = matrix_workloads.include(data, path)
    except matrix_workloads.FragmentError as exc:
        raise fail(exc.source, exc.problems, exc.what) from None
    try:
        matrix = Matrix.model_validate(data)
    except ValidationError as exc:
        raise fail(path, [_problem(err) for err in exc.errors()]) from None
    problems = matrix.problems()
    if problems:
        raise fail(path, problems)
    matrix._workload_origins = origins
    return matrix


def _read(path: Path) -> str:
    project = ", ".join(sorted(p.name for p in paths.MATRICES.glob("*.toml")))
    if path.is_dir():
        inside = ", ".join(sorted(p.name for p in path.glob("*.toml"))) or "none"
        raise MatrixError(f"{path}: is a directory, not a matrix file (its .toml files: {inside}; "
                          f"the project's matrix files: {project})")
    if not path.exists() and path == paths.DEFAULT_MATRIX and not paths.CHECKOUT:
        raise MatrixError(f"{path}: no matrix file given and this folder has no matrix/default.toml. An installed "
                          "opmatrix runs the matrix/, kernels/ and backends/ of the project you are in: pass a matrix "
                          "file (`opmatrix run path/to/matrix.toml`), or work in a checkout of opmatrix, whose "
                          "matrix/default.toml runs its kernels on any machine")
    if not path.exists():
        raise MatrixError(f"{path}: no such matrix file (the project's matrix files: {project or 'none'})")
    if not path.is_file():
        raise MatrixError(f"{path}: not a regular file; a matrix file is a TOML file such as {paths.DEFAULT_MATRIX}")
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise MatrixError(f"{path}: cannot read the matrix file: {exc.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise MatrixError(f"{path}: larger than {MAX_FILE_BYTES} bytes; a matrix file is a few KB of TOML")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MatrixError(f"{path}: not UTF-8 text (byte {raw[exc.start]:#04x} at offset {exc.start}); a matrix "
                          "file is TOML, which must be saved as UTF-8") from None


def _problem(err: dict) -> Problem:
    """A pydantic error as a Problem: key path, offending value and what is allowed."""
    loc = err["loc"]
    key = "".join(f"[{p}]" if isinstance(p, int) else p if p == "[key]" else f".{p}" for p in loc).lstrip(".")
    key = key or "(top level)"
    msg = err["msg"].removeprefix("Value error, ")
    value = err.get("input", NO_VALUE)
    if err["type"] == "extra_forbidden":
        return Problem(key, NO_VALUE, f"unknown key; allowed here: {_keys(loc[:-1])}")
    if err["type"] == "missing" or isinstance(value, (dict, list)):
        value = NO_VALUE
    if err["type"] in ("finite_number", "greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        msg += f"; allowed: {_bounds(loc)}"
    return Problem(key, value, msg)


def _model_at(loc: tuple) -> type[BaseModel]:
    model: type[BaseModel] = Matrix
    for part in loc:
        if isinstance(part, int) or part not in model.model_fields:
            continue
        annotation = model.model_fields[part].annotation
        inner = getattr(annotation, "__args__", (annotation,))[0]
        if isinstance(inner, type) and not hasattr(inner, "__origin__") and issubclass(inner, BaseModel):
            model = inner
    return model


def _keys(loc: tuple) -> str:
    return ", ".join(sorted(k for k in _model_at(loc).model_fields if k != "source"))


def _bounds(loc: tuple) -> str:
    """'0 < value <= 86400, finite' from the constraints declared on the field at loc."""
    field = _model_at(loc[:-1]).model_fields.get(loc[-1])
    keys = ("gt", "ge", "lt", "le", "allow_inf_nan")
    meta = {k: getattr(m, k) for m in (field.metadata if field else []) for k in keys if hasattr(m, k)}
    low = f"{meta['gt']} < " if "gt" in meta else f"{meta['ge']} <= " if "ge" in meta else ""
    high = f" < {meta['lt']}" if "lt" in meta else f" <= {meta['le']}" if "le" in meta else ""
    return f"{low}value{high}" + (", finite" if meta.get("allow_inf_nan") is False else "")
