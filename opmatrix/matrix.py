"""Matrix files: load a TOML file and validate it into a `Matrix`.

Every error names the file, the key (as a path such as `toolchain[1].installer`) and what is allowed, so a user
can fix the file without reading this code.
"""
from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from opmatrix import paths

Vendor = Literal["nvidia", "amd", "cpu"]
VENDORS = ("nvidia", "amd", "cpu")
IDENT = r"^[a-z0-9][a-z0-9_.-]*$"


class MatrixError(Exception):
    """A matrix file is missing, unreadable or invalid. The message says where and how to fix it."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Device(_Model):
    id: str = Field(pattern=IDENT)
    vendor: Vendor
    arch: str = Field(description="sm_90, gfx942, x86_64 ... or 'auto' to take the host's")
    name: str = Field(".*", description="regular expression matched against the host's GPU product name")
    fallback: bool = Field(False, description="claim a host GPU only when no other device of the matrix does")
    description: str = ""

    @field_validator("name")
    @classmethod
    def _regex(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression ({exc})") from None
        return value


class Toolchain(_Model):
    name: str = Field(pattern=IDENT)
    python: str | None = Field(None, description="'3.11' or an interpreter path; default: the host's python")
    system: bool = Field(False, description="layer the cell's packages over the host interpreter's own packages")
    installer: Literal["pip", "uv"] = "pip"
    packages: list[str] = []
    index: dict[Vendor, str] = Field({}, description="extra package index per device vendor")
    devices: list[str] | None = Field(None, description="device ids this toolchain applies to (default: all)")
    env: dict[str, str] = {}


class KernelEntry(_Model):
    name: str = Field(pattern=IDENT)
    workloads: dict[Vendor, list[str]]
    dtypes: dict[Vendor, list[str]]
    backends: list[str] | None = None
    timeout_s: float | None = Field(None, gt=0)


class Exclude(_Model):
    device: str | None = None
    toolchain: str | None = None
    kernel: str | None = None
    backend: str | None = None
    workload: str | None = None
    dtype: str | None = None
    variant: str | None = None
    reason: str = ""

    @model_validator(mode="after")
    def _not_empty(self) -> Exclude:
        if not any(getattr(self, k) for k in EXCLUDE_KEYS):
            raise ValueError(f"an exclude needs at least one of {', '.join(EXCLUDE_KEYS)}")
        return self

    def matches(self, **values: str) -> bool:
        """True when every key this exclude sets equals the given value (keys not given never match)."""
        return all(getattr(self, k) is None or values.get(k) == getattr(self, k) for k in EXCLUDE_KEYS)


EXCLUDE_KEYS = ("device", "toolchain", "kernel", "backend", "workload", "dtype", "variant")


class RunSettings(_Model):
    timeout_s: float = Field(900, gt=0, description="per job (kernel x workload x dtype x backend x variant)")
    trials: int = Field(3, ge=3, description="correctness trials, each with fresh random inputs")
    seed: int = 0
    warmup_ms: float = Field(25, ge=0)
    rep_ms: float = Field(100, gt=0)
    cuda_graph_below_ms: float = Field(0.05, ge=0, description="GPU rows whose event median is below this are also "
                                       "timed by CUDA-graph replay (graph_median_ms); 0 turns it off")
    crosscheck: bool = Field(False, description="time each GPU row also from CUPTI kernel records "
                                                "(torch.profiler) and record the agreement with the event median")
    kernels_dir: str | None = None
    backends_dir: str | None = None
    compile_only: bool = Field(True, description="for devices no host has, build (or lower) each kernel for them "
                               "on a CPU host and report compiles / lowers")


class Acceptance(_Model):
    baseline: str = "torch"
    min_speedup: float = Field(1.05, gt=0, description="a backend must beat the baseline by this to be adopted")
    max_rel_err: float | None = Field(None, gt=0)


class Matrix(_Model):
    name: str = Field(pattern=IDENT)
    description: str = ""
    run: RunSettings = RunSettings()
    acceptance: Acceptance = Acceptance()
    backends: list[str]
    device: list[Device] = Field(min_length=1)
    toolchain: list[Toolchain] = Field(min_length=1)
    kernel: list[KernelEntry] = Field(min_length=1)
    exclude: list[Exclude] = []
    source: str = ""  # the file it was read from; set by load_matrix

    @model_validator(mode="after")
    def _cross_references(self) -> Matrix:
        _unique("device", [d.id for d in self.device])
        _unique("toolchain", [t.name for t in self.toolchain])
        _unique("kernel", [k.name for k in self.kernel])
        devices = {d.id for d in self.device}
        for i, tc in enumerate(self.toolchain):
            for dev in tc.devices or []:
                _known(f"toolchain[{i}].devices", dev, devices)
        names = {"device": devices, "toolchain": {t.name for t in self.toolchain},
                 "kernel": {k.name for k in self.kernel}}
        for i, ex in enumerate(self.exclude):
            for key, allowed in names.items():
                if getattr(ex, key) is not None:
                    _known(f"exclude[{i}].{key}", getattr(ex, key), allowed)
        return self

    def devices(self) -> dict[str, Device]:
        return {d.id: d for d in self.device}

    def kernels_dir(self) -> Path:
        return self._dir(self.run.kernels_dir, paths.KERNELS)

    def backends_dir(self) -> Path:
        return self._dir(self.run.backends_dir, paths.BACKENDS)

    def _dir(self, value: str | None, default: Path) -> Path:
        if value is None:
            return default
        return (Path(self.source).parent / value).resolve()


def _unique(what: str, names: list[str]) -> None:
    seen = {n for n in names if names.count(n) > 1}
    if seen:
        raise ValueError(f"{what} names must be unique; repeated: {', '.join(sorted(seen))}")


def _known(key: str, value: str, allowed: set[str]) -> None:
    if value not in allowed:
        raise ValueError(f"{key} = {value!r} names nothing in this file; allowed: {', '.join(sorted(allowed))}")


def load_matrix(path: str | Path) -> Matrix:
    """Read and validate a matrix file; raise MatrixError naming file, key and the fix."""
    path = Path(path)
    if not path.is_file():
        hint = ", ".join(sorted(p.name for p in paths.MATRICES.glob("*.toml")))
        raise MatrixError(f"{path}: no such matrix file (the project's matrix files: {hint})")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise MatrixError(f"{path}: not valid TOML: {exc}") from None
    data.setdefault("name", re.sub(r"[^a-z0-9_.-]", "-", path.stem.lower()))
    data["source"] = str(path.resolve())
    try:
        return Matrix.model_validate(data)
    except ValidationError as exc:
        raise MatrixError(format_errors(path, exc)) from None


def format_errors(path: Path, exc: ValidationError) -> str:
    lines = [f"{path}: {exc.error_count()} problem(s) in the matrix file"]
    for err in exc.errors():
        key = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".") or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown key; allowed here: {', '.join(_allowed_keys(err['loc']))}"
        elif "input" in err and err["type"] not in ("missing",) and not isinstance(err["input"], (dict, list)):
            msg += f" (got {err['input']!r})"
        lines.append(f"  {key}: {msg}")
    return "\n".join(lines)


def _allowed_keys(loc: tuple) -> list[str]:
    model: type[BaseModel] = Matrix
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        annotation = model.model_fields[part].annotation
        inner = getattr(annotation, "__args__", (annotation,))[0]
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            model = inner
    return sorted(k for k in model.model_fields if k != "source")
