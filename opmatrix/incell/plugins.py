"""Load kernel specs, kernel implementations and backend adapters by path, checked when loaded, and the small
types a plugin file hands back.

Plain modules, like asv benchmarks: `kernels/<op>/spec.py`, `kernels/<op>/<backend>.py`, `backends/<backend>.py`.
Where they come from (`Registry`, `discover`): the ones shipped with opmatrix (opmatrix.paths.BUILTIN_*), those other
installed packages register through the entry point groups `opmatrix.kernels` and `opmatrix.backends`, and the
project's own kernels/ and backends/, which add to them or override them by name (the project's wins). Each is
checked against its contract (opmatrix.incell.contract) as it is loaded, so a wrong signature or an unknown constant
is a PluginError naming the file and the fix before anything is built. Plugin files import what they need from
`opmatrix.kit`, which re-exports `Built`, `Compiled`, `Unsupported`, `Unavailable` and `require`.
Stdlib only: this runs inside cell environments too.
"""
from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.metadata
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Callable

from opmatrix.core import status
from opmatrix.incell import contract
from opmatrix.incell.contract import PluginError

__all__ = ["PluginError", "Unsupported", "Unavailable", "Built", "Compiled", "Backend", "require", "module_file",
           "load_spec", "load_impl", "load_backend", "impl_path", "built_from", "declared_variants", "Found",
           "Registry", "discover", "KERNEL_GROUP", "BACKEND_GROUP"]

KERNEL_GROUP = "opmatrix.kernels"  # entry points: `<kernel> = <package>`, a folder <kernel>/ holding spec.py
BACKEND_GROUP = "opmatrix.backends"  # entry points: `<backend> = <module>`, a file named module_file(<backend>)
SHIPPED, PROJECT = "shipped", "project"


class Unsupported(Exception):
    """Raised by a backend or an implementation: this device/dtype/workload is not covered (reason in message)."""


class Unavailable(Exception):
    """Raised by a backend's available(): its package cannot be imported here (reason in message)."""


@dataclass(frozen=True)
class Built:
    """What `build` returns: the function the worker checks and times, `fn(*inputs, out)`, with the configuration
    it was built with (recorded in the row as JSON) and whether the build reused an earlier one's compiled code
    (`cache`: "cold" = compiled from nothing in this job's own empty cache)."""

    fn: Callable
    config: dict = field(default_factory=dict)
    cache: str = "cold"

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError(f"Built.fn must be callable, got {type(self.fn).__name__}")
        if not isinstance(self.config, dict):
            raise TypeError(f"Built.config must be a dict, got {type(self.config).__name__}")


@dataclass(frozen=True)
class Compiled:
    """What `compile_for` returns for a device no host has: `status` "compiles" (a binary was made here) or
    "lowers" (device source only, no compiler for a binary here), what was made, and the configuration."""

    status: str
    what: str
    config: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in status.BUILD_ONLY:
            raise ValueError(f"Compiled.status must be one of {', '.join(status.BUILD_ONLY)}, got {self.status!r}")


def require(module: str):
    """Import a backend's package, or raise Unavailable saying why: the common first line of available()."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise Unavailable(f"{module} is not importable in this environment: {exc}") from None
    except Exception as exc:  # packages that load native libraries at import: a broken install, not a kernel bug
        raise Unavailable(f"{module} failed to import: {type(exc).__name__}: {exc}") from None


class Backend:
    """A loaded backends/<name>.py with the contract's defaults filled in, so the file states only what differs:
    covers every device, sets no environment, and is timed (TIMED = True) unless it says otherwise. The worker
    and the cell runner ask this object, never the module."""

    def __init__(self, module: ModuleType, path: Path) -> None:
        self.module, self.path = module, path
        self.compiles_on_first_call = getattr(module, "COMPILES_ON_FIRST_CALL", False)
        self.builds_vary = getattr(module, "BUILDS_VARY", False)
        if hasattr(module, "TIMED") and hasattr(module, "timed"):
            raise PluginError(f"{path}: declares both TIMED and timed(device); keep one (timed(device) when the "
                              "answer depends on the device)")

    def available(self) -> str:
        """The version actually imported; raises Unavailable when the backend's package is not importable."""
        return str(self.module.available())

    def covers(self, device) -> str | None:
        """None when the backend runs on `device`, else the reason it does not."""
        reason = self.module.covers(device) if hasattr(self.module, "covers") else None
        if reason is not None and not (isinstance(reason, str) and reason):
            raise PluginError(f"{self.path}: covers(device) must return None or a reason string, got {reason!r}")
        return reason

    def environment(self, device, cache_dir: Path) -> dict[str, str]:
        """Environment variables for the worker (compiler caches pointed into the job's own folder)."""
        env = self.module.environment(device, Path(cache_dir)) if hasattr(self.module, "environment") else {}
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise PluginError(f"{self.path}: environment(device, cache_dir) must return a dict of str -> str, "
                              f"got {env!r}")
        return env

    def timed(self, device) -> bool:
        """Whether a timing on `device` means anything (an interpreter's does not: correctness only)."""
        if not hasattr(self.module, "timed"):
            return getattr(self.module, "TIMED", True)
        answer = self.module.timed(device)
        if not isinstance(answer, bool):
            raise PluginError(f"{self.path}: timed(device) must return True or False, got {answer!r}")
        return answer


def built_from(value, path: Path) -> Built:
    """The one rule for what `build` may return: a Built, or a bare callable taken as Built(fn) (no recorded
    configuration, cold cache). A callable carrying the retired `fn.config` / `fn.compile_cache` attributes is
    refused rather than silently losing them."""
    if isinstance(value, Built):
        return value
    if callable(value):
        stale = [a for a in ("config", "compile_cache") if hasattr(value, a)]
        if stale:
            raise PluginError(f"{path}: build set fn.{' and fn.'.join(stale)} on the function it returned; return "
                              "opmatrix.kit.Built(fn, config={...}, cache=...) instead")
        return Built(value)
    raise PluginError(f"{path}: build returned {type(value).__name__}; it returns opmatrix.kit.Built(fn, config=...)"
                      " where fn(*inputs, out) runs the kernel")


def module_file(name: str) -> str:
    """Backend 'torch-compile' lives in torch_compile.py."""
    return name.replace("-", "_") + ".py"


def load_module(path: Path, rules: contract.Contract) -> ModuleType:
    """Import `path` under a name unique to its location (once per process) and check it against `rules`."""
    if not path.is_file():
        raise PluginError(f"{path}: no such {rules.what} file")
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    name = f"opmatrix_plugin_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        contract.check(module, path, rules)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_spec(kernels_dir: Path, kernel: str) -> ModuleType:
    return load_module(Path(kernels_dir) / kernel / "spec.py", contract.SPEC)


def impl_path(kernels_dir: Path, kernel: str, backend: str) -> Path:
    return Path(kernels_dir) / kernel / module_file(backend)


def load_impl(kernels_dir: Path, kernel: str, backend: str) -> ModuleType:
    return load_module(impl_path(kernels_dir, kernel, backend), contract.IMPL)


def load_backend(backends_dir: Path, backend: str) -> Backend:
    path = Path(backends_dir) / module_file(backend)
    return Backend(load_module(path, contract.BACKEND), path)


SOURCE_SUFFIXES = {".py", ".cu", ".cuh", ".cpp", ".h", ".hpp", ".hip"}


def implementation_files(kernels_dir: Path, kernel: str, backend: str) -> list[Path]:
    """A backend's implementation of a kernel: kernels/<kernel>/<backend>.py and the sources beside it that carry
    its name (cutlass_gemm_relu.cu), the files its lines of code and its source digest are taken over. Another
    backend's implementation is never one of them: `torch` does not take torch_compile.py (a .py file belongs only
    to the backend of its exact name), and a source named after two implementations (torch_compile_x.cu) belongs
    to the longer name's."""
    folder = Path(kernels_dir) / kernel
    stem = module_file(backend)[: -len(".py")]
    implementations = {p.stem for p in folder.glob("*.py")}

    def owner(path: Path) -> str:  # the longest implementation name the source is named after
        return max((s for s in implementations if path.stem.startswith(s + "_")), key=len, default=stem)

    return sorted(p for p in folder.glob(f"{stem}*") if p.suffix in SOURCE_SUFFIXES and p.is_file()
                  and (p.stem == stem or (p.suffix != ".py" and p.stem.startswith(stem + "_") and owner(p) == stem)))


def declared_variants(path: Path) -> tuple[str, ...]:
    """The VARIANTS an implementation file declares, read without importing it (no framework needed)."""
    if not path.is_file():
        return ("default",)
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "VARIANTS" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                raise PluginError(f"{path}: VARIANTS must be a literal tuple of names") from None
            if not value or not all(isinstance(v, str) for v in value):
                raise PluginError(f"{path}: VARIANTS must be a non-empty tuple of strings, got {value!r}")
            return tuple(value)
    return ("default",)


@dataclass(frozen=True)
class Found:
    """Where one kernel or backend was found: `folder` is what the loaders take (for a kernel the folder holding
    <kernel>/, for a backend the folder holding its file), `origin` who provides it (SHIPPED, PROJECT or
    "entry point NAME = VALUE (distribution VERSION)") and `path` the kernel folder or backend file itself."""

    name: str
    folder: Path
    origin: str
    path: Path


class Registry:
    """Every kernel and backend a matrix can name, by name, from all sources in order of precedence: the project's
    own folders win over everything (an override, said by `origins()`); two other sources offering one name are a
    clash, refused with both named when that name is used (`kernel`, `backend`)."""

    def __init__(self, kernels: dict[str, list[Found]], backends: dict[str, list[Found]],
                 broken: dict[tuple[str, str], str], searched: dict[str, str]) -> None:
        self._found = {"kernel": kernels, "backend": backends}
        self._broken = broken  # (kind, name) -> why an entry point offering that name cannot be used
        self._searched = searched  # kind -> where names were looked for, in words

    def searched(self, kind: str) -> str:
        """Where kernels ("kernel") or backends ("backend") were looked for, in words, for error messages."""
        return self._searched[kind]

    def kernels(self) -> tuple[str, ...]:
        return tuple(sorted({*self._found["kernel"], *(n for k, n in self._broken if k == "kernel")}))

    def backends(self) -> tuple[str, ...]:
        return tuple(sorted({*self._found["backend"], *(n for k, n in self._broken if k == "backend")}))

    def kernel(self, name: str) -> Found:
        return self._pick("kernel", name)

    def backend(self, name: str) -> Found:
        return self._pick("backend", name)

    def kernel_dir(self, name: str) -> Path:
        return self.kernel(name).folder

    def backend_dir(self, name: str) -> Path:
        return self.backend(name).folder

    def _pick(self, kind: str, name: str) -> Found:
        if (kind, name) in self._broken:
            raise PluginError(self._broken[kind, name])
        found = self._found[kind].get(name)
        if not found:
            what = f"kernel spec {name}/spec.py" if kind == "kernel" else f"backend adapter {module_file(name)}"
            raise PluginError(f"no {what} in {self._searched[kind]}")
        if found[0].origin == PROJECT or len(found) == 1:
            return found[0]
        where = "; ".join(f"{f.origin}: {f.path}" for f in found)
        fix = f"kernels/{name}/" if kind == "kernel" else f"backends/{module_file(name)}"
        raise PluginError(f"{kind} {name!r} is provided {len(found)} times ({where}); opmatrix will not choose "
                          f"between them: uninstall or rename one, or put the one to use in the project's {fix}, "
                          "which wins over the others")

    def origins(self, kernels, backends) -> list[str]:
        """One line per named kernel and backend that is not the package's own: who provides it, and what the
        project's own file overrides. Names that cannot be used are left to the names check."""
        out = []
        for kind, names in (("kernel", kernels), ("backend", backends)):
            for name in sorted(set(names)):
                try:
                    chosen = self._pick(kind, name)
                except PluginError:
                    continue
                if chosen.origin == SHIPPED:
                    continue
                others = [f"{f.origin} {f.path}" for f in self._found[kind][name] if f is not chosen]
                out.append(f"{kind} {name}: {chosen.origin} {chosen.path}"
                           + (f", overriding {'; '.join(others)}" if others else ""))
        return out


def discover(shipped_kernels: Path, shipped_backends: Path, project_kernels: Path | None = None,
             project_backends: Path | None = None) -> Registry:
    """The registry of the shipped plugins (opmatrix.paths.BUILTIN_*), the installed packages' entry points and the
    project's folders (those that exist). A project folder that is the shipped one (a checkout of opmatrix is itself
    a project: its kernels/ and backends/ are the built-in ones) is one source, the shipped: nothing is listed twice
    or overrides itself. Nothing is imported but the packages that hold entry point files (to find them); each file
    is checked against its contract when it is loaded."""
    same = {"kernel": _same_folder(project_kernels, shipped_kernels),
            "backend": _same_folder(project_backends, shipped_backends)}
    project_kernels = None if same["kernel"] else project_kernels
    project_backends = None if same["backend"] else project_backends
    kernels: dict[str, list[Found]] = {}
    backends: dict[str, list[Found]] = {}
    broken: dict[tuple[str, str], str] = {}
    project = [Found(n, f, PROJECT, p) for n, f, p in _folder_kernels(project_kernels)]
    shipped = [Found(n, f, SHIPPED, p) for n, f, p in _folder_kernels(shipped_kernels)]
    for found in [*project, *_entry_points(KERNEL_GROUP, broken), *shipped]:
        kernels.setdefault(found.name, []).append(found)
    project = [Found(n, f, PROJECT, p) for n, f, p in _folder_backends(project_backends)]
    shipped = [Found(n, f, SHIPPED, p) for n, f, p in _folder_backends(shipped_backends)]
    for found in [*project, *_entry_points(BACKEND_GROUP, broken), *shipped]:
        backends.setdefault(found.name, []).append(found)
    searched = {kind: ("" if same[kind] else f"the project's {project or '(none)'}, ")
                      + f"the shipped {shipped} or an installed package's {group} entry points"
                for kind, project, shipped, group in (("kernel", project_kernels, shipped_kernels, KERNEL_GROUP),
                                                      ("backend", project_backends, shipped_backends, BACKEND_GROUP))}
    return Registry(kernels, backends, broken, searched)


def _same_folder(a: Path | None, b: Path | None) -> bool:
    return a is not None and b is not None and Path(a).resolve() == Path(b).resolve()


def _folder_kernels(folder: Path | None):
    if folder is None or not Path(folder).is_dir():
        return []
    return [(p.name, Path(folder), p) for p in sorted(Path(folder).iterdir()) if (p / "spec.py").is_file()]


def _folder_backends(folder: Path | None):
    if folder is None or not Path(folder).is_dir():
        return []
    return [(p.stem.replace("_", "-"), Path(folder), p) for p in sorted(Path(folder).glob("*.py"))
            if not p.name.startswith("_")]


def _entry_points(group: str, broken: dict[tuple[str, str], str]) -> list[Found]:
    """The plugins installed packages register under `group`, located without importing the plugin file."""
    kind = "kernel" if group == KERNEL_GROUP else "backend"
    out = []
    for ep in importlib.metadata.entry_points(group=group):
        dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist is not None else "unknown distribution"
        origin = f"entry point {ep.name} = {ep.value} ({dist})"
        try:
            out.append(_entry_point_found(kind, ep, origin))
        except PluginError as exc:
            broken[kind, ep.name] = f"{group} {origin}: {exc}"
    return out


def _entry_point_found(kind: str, ep, origin: str) -> Found:
    if ep.attr:
        raise PluginError(f"names an object ({ep.attr}); name a {'package' if kind == 'kernel' else 'module'} only")
    try:
        spec = importlib.util.find_spec(ep.module)
    except (ImportError, ValueError) as exc:
        spec, why = None, f": {type(exc).__name__}: {exc}"
    else:
        why = ""
    if spec is None:
        raise PluginError(f"{ep.module} cannot be found in this environment{why}")
    if kind == "kernel":
        locations = list(spec.submodule_search_locations or [])
        if not locations:
            raise PluginError(f"{ep.module} is a module; a kernel is a package folder {ep.name}/ holding spec.py")
        folder = Path(locations[0])
        if folder.name != ep.name or not (folder / "spec.py").is_file():
            raise PluginError(f"a kernel entry point names a folder called like the kernel ({ep.name}/) that holds "
                              f"spec.py; {folder} is not one")
        return Found(ep.name, folder.parent, origin, folder)
    path = Path(spec.origin or "")
    if path.name != module_file(ep.name) or not path.is_file():
        raise PluginError(f"a backend entry point names a module whose file is named like the backend "
                          f"({module_file(ep.name)}); {ep.module} is {path}")
    return Found(ep.name, path.parent, origin, path)
