"""What exists on disk for a matrix to name: kernels (their workloads and declared dtypes), backend adapters, and
the variants each implementation declares.

Read without any framework: a kernel's spec.py imports none at module level, so it is imported here (by path, as
the planner does); implementation files are only parsed (`plugins.declared_variants`). `check(matrix)` is the
names check: run it after `load_matrix` and before any work, so that a typo in a backend, workload, dtype or
exclude is refused with the allowed names instead of becoming a KeyError mid-run or an exclude that drops nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from opmatrix import matrix_workloads
from opmatrix.incell import contents, contract, plugins
from opmatrix.incell.phases import line_in
from opmatrix.incell.plugins import PluginError
from opmatrix.matrix import Exclude, Matrix, Problem, fail
from opmatrix.matrix_checks import NO_VALUE, unknown

# The dtypes of a spec that declares neither DTYPES nor a TOLERANCE table (test probes): torch's float types.
GENERIC_DTYPES = ("float16", "bfloat16", "float32", "float64")


@dataclass(frozen=True)
class KernelInfo:
    name: str
    spec: Path
    workloads: tuple[str, ...]  # in the spec's order
    dtypes: tuple[str, ...]
    declared: bool  # False: the spec declares no dtypes; `dtypes` is GENERIC_DTYPES
    module: ModuleType | None = field(default=None, compare=False, repr=False)  # the loaded spec.py


class Catalog:
    """The kernels and backends a matrix can name (its `plugins.Registry`: shipped, entry points, the project's)."""

    def __init__(self, registry: plugins.Registry) -> None:
        self.registry = registry
        self._kernels: dict[str, KernelInfo] = {}

    @classmethod
    def of(cls, matrix: Matrix) -> Catalog:
        return cls(matrix.plugins())

    def backends(self) -> tuple[str, ...]:
        """The adapters' names: backends/torch_compile.py is 'torch-compile'."""
        return self.registry.backends()

    def kernels(self) -> tuple[str, ...]:
        """The kernels: folders with a spec.py."""
        return self.registry.kernels()

    def kernel(self, name: str) -> KernelInfo:
        """A kernel's workloads and dtypes; PluginError when its spec is missing or broken."""
        if name not in self._kernels:
            self._kernels[name] = _read_spec(self.registry.kernel_dir(name), name)
        return self._kernels[name]

    def variants(self, kernel: str, backend: str) -> tuple[str, ...]:
        """The VARIANTS kernels/<kernel>/<backend>.py declares; ('default',) when it declares none or is absent."""
        return plugins.declared_variants(plugins.impl_path(self.registry.kernel_dir(kernel), kernel, backend))

    def problems(self, matrix: Matrix) -> list[Problem]:
        """Every name in the matrix that these folders do not have, with the names they do have."""
        out = _missing_folders(matrix)
        backends = self.backends()
        for key, name in _backend_keys(matrix):
            if name not in backends:
                out.append(unknown(key, name, backends, f"backend adapter in {self.registry.searched('backend')}"))
            else:
                out += _backend_problem(key, name, self.registry)
        for i, entry in enumerate(matrix.kernel):
            try:
                info = self.kernel(entry.name)
            except PluginError as exc:
                allowed = [k for k in self.kernels() if k != entry.name]
                out.append(Problem(f"kernel[{i}].name", entry.name, str(exc) + (
                    "" if entry.name in self.kernels() else f"; allowed: {', '.join(allowed) or '(none)'}")))
                continue
            out += self._source_problems(f"kernel[{i}]", entry.name, entry.backends or matrix.backends,
                                         set(backends))
            dtypes = (f"dtype {info.spec} declares" if info.declared
                      else f"generic dtype ({info.spec} declares no DTYPES)")
            defined = tuple(matrix.workload.get(entry.name, {}))
            workloads = f"workload {info.spec} defines" + (f", or [workload.{entry.name}.<name>] of the matrix "
                                                           "(workloads_from)" if defined else "")
            for table, allowed, what in (("workloads", info.workloads + defined, workloads),
                                         ("dtypes", info.dtypes, dtypes)):
                out += [unknown(f"kernel[{i}].{table}.{vendor}[{j}]", name, allowed, what)
                        for vendor, names in getattr(entry, table).items()
                        for j, name in enumerate(names) if name not in allowed]
        for i, ex in enumerate(matrix.exclude):
            if ex.variant is not None:
                out += self._variant_problems(matrix, f"exclude[{i}].variant", ex, set(backends))
        return out + self._defined_problems(matrix)

    def _source_problems(self, key: str, kernel: str, named: list[str], backends: set[str]) -> list[Problem]:
        """The implementation files of `kernel` for the backends named, each read without importing it
        (contract.check_source): a syntax error, an unknown constant, a hook of the wrong arity, with file and line."""
        out = []
        for backend in named:
            path = plugins.impl_path(self.registry.kernel_dir(kernel), kernel, backend)
            if backend in backends and path.is_file():
                why = contract.check_source(path, contract.IMPL)
                if why:
                    out.append(Problem(f"{key} {kernel} x {backend}", NO_VALUE, why))
        return out

    def _defined_problems(self, matrix: Matrix) -> list[Problem]:
        """The workloads the matrix defines by their parameters (opmatrix.matrix_workloads), against their
        kernels' specs: a kernel that exists, a name the spec does not use, the spec's parameters."""
        out = []
        for kernel, names in matrix.workload.items():
            key = f"workload.{kernel}{_where(matrix, kernel, names)}"
            if kernel not in self.kernels():
                out.append(unknown(key, kernel, self.kernels(), f"kernel in {self.registry.searched('kernel')}"))
                continue
            try:
                info = self.kernel(kernel)
            except PluginError as exc:
                out.append(Problem(key, NO_VALUE, str(exc)))
                continue
            for name, params in names.items():
                key = f"workload.{kernel}.{name}{_where(matrix, kernel, [name])}"
                if name in info.workloads:
                    out.append(Problem(key, NO_VALUE, f"{info.spec} defines a workload of that name; give this one "
                                       "another name"))
                elif (why := matrix_workloads.problem(info.module, params)) is not None:
                    out.append(Problem(key, NO_VALUE, f"not a workload of {info.spec}: {why}"))
        return out

    def _variant_problems(self, matrix: Matrix, key: str, ex: Exclude, backends: set[str]) -> list[Problem]:
        pairs = [(k.name, b) for k in matrix.kernel for b in (k.backends or matrix.backends)
                 if b in backends and ex.kernel in (None, k.name) and ex.backend in (None, b)]
        allowed = {v for kernel, backend in pairs for v in self.variants(kernel, backend)}
        if ex.variant in allowed:
            return []
        scope = " and ".join(f"{k} {getattr(ex, k)!r}" for k in ("kernel", "backend") if getattr(ex, k))
        return [unknown(key, ex.variant, allowed, "variant the implementations this file runs declare"
                        + (f" for {scope}" if scope else ""))]


def check(matrix: Matrix, catalog: Catalog | None = None) -> Catalog:
    """The names check: raise MatrixError (file, key path, value, allowed names) for every backend, kernel,
    workload, dtype or exclude variant the plugin folders do not have. Returns the catalog it checked against."""
    catalog = catalog or Catalog.of(matrix)
    problems = catalog.problems(matrix)
    if problems:
        raise fail(matrix.source, problems)
    return catalog


def _where(matrix: Matrix, kernel: str, names) -> str:
    """' (in FILE)' for defined workloads a workloads_from file holds; '' for the matrix file's own tables."""
    files = sorted({matrix.workload_origin(kernel, n) for n in names} - {Path(matrix.source).name})
    return f" (in {', '.join(files)})" if files else ""


def _missing_folders(matrix: Matrix) -> list[Problem]:
    """[run] kernels_dir / backends_dir set to a folder that does not exist."""
    return [Problem(f"run.{key}", value, f"no such folder ({folder}); leave it unset for the project's {key[:-4]}/ "
                    "folder (and the shipped ones), or name a folder that exists")
            for key, value, folder in (("kernels_dir", matrix.run.kernels_dir, matrix.kernels_dir()),
                                       ("backends_dir", matrix.run.backends_dir, matrix.backends_dir()))
            if value is not None and not folder.is_dir()]


def _backend_problem(key: str, name: str, registry: plugins.Registry) -> list[Problem]:
    """A named backend that cannot be used: offered twice (a clash), a broken entry point, an entry point's file
    that fails its contract when loaded (a backend file imports no framework at module level), or a shipped or
    project adapter that does not parse or breaks its contract as read (contract.check_source)."""
    try:
        found = registry.backend(name)
        if found.origin not in (plugins.SHIPPED, plugins.PROJECT):  # an installed package's: checked before use
            plugins.load_backend(found.folder, name)
        else:  # read, never imported here (an adapter may need the cell's packages): parse, constants, arity
            why = contract.check_source(found.path, contract.BACKEND)
            if why:
                return [Problem(key, name, why)]
    except PluginError as exc:
        return [Problem(key, name, str(exc))]
    return []


def _backend_keys(matrix: Matrix) -> list[tuple[str, str]]:
    """(key path, backend) for every backend the matrix lists."""
    keys = [(f"backends[{j}]", b) for j, b in enumerate(matrix.backends)]
    for i, entry in enumerate(matrix.kernel):
        keys += [(f"kernel[{i}].backends[{j}]", b) for j, b in enumerate(entry.backends or [])]
    return keys


def _import_failed(exc: Exception, path: Path) -> str:
    """Why a spec failed to import, with its line and a fix that applies: a module that is not there (the planner
    has no framework: a spec imports torch inside its hooks), a name a module does not have, or an error in the
    spec's own code at module level."""
    line = line_in(exc, path)
    where = f"{path}:{line}" if line is not None else str(path)
    missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
    if missing and missing.split(".")[0] != "opmatrix":
        fix = (f"the planner imports a spec without the cells' packages, so a spec imports no framework at module "
               f"level: import {missing.split('.')[0]} inside make_inputs, make_output and reference (or, if "
               f"{missing!r} is a typo, fix that line)")
    elif isinstance(exc, ImportError):
        fix = "that module has no such name: fix the name on that line"
    else:
        fix = "the spec's module-level code raised: fix that line"
    return f"{where}: failed to import ({type(exc).__name__}: {exc}); {fix}"


def _read_spec(kernels_dir: Path, name: str) -> KernelInfo:
    path = kernels_dir / name / "spec.py"
    parsed = contract.check_source(path, contract.SPEC) if path.is_file() else ""
    if parsed:
        raise PluginError(parsed)
    try:
        spec = plugins.load_spec(kernels_dir, name)
    except PluginError:
        raise
    except Exception as exc:
        raise PluginError(_import_failed(exc, path)) from None
    if not isinstance(spec.WORKLOADS, dict) or not spec.WORKLOADS:
        raise PluginError(f"{path}: WORKLOADS must be a non-empty dict of name -> shape")
    declared = getattr(spec, "DTYPES", None)
    if declared is None and isinstance(getattr(spec, "TOLERANCE", None), dict):
        declared = tuple(spec.TOLERANCE)
    if declared is not None and (isinstance(declared, str) or not declared
                                 or not all(isinstance(d, str) for d in declared)):
        raise PluginError(f"{path}: DTYPES must be a non-empty tuple of dtype names, got {declared!r}")
    contents.input_kinds(spec)  # INPUT_KINDS and NONFINITE_KINDS, as the judge reads them
    return KernelInfo(name, path, tuple(spec.WORKLOADS), tuple(declared or GENERIC_DTYPES), declared is not None,
                      spec)
