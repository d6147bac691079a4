"""Load kernel specs, kernel implementations and backend adapters by path, and check their contracts.

Plain modules, like asv benchmarks: `kernels/<op>/spec.py`, `kernels/<op>/<backend>.py`, `backends/<backend>.py`.
A file that does not honour its contract is rejected when loaded, with the file, the missing name and the fix.
Stdlib only: this runs inside cell environments too.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from opmatrix.core.jobs import DeviceInfo  # noqa: F401  (the device as plugins see it)

SPEC_CONTRACT = ("WORKLOADS", "make_inputs", "make_output", "reference", "flops", "min_bytes", "tolerance",
                 "describe")
IMPL_CONTRACT = ("build",)
BACKEND_CONTRACT = ("available", "covers", "environment", "timer")


class PluginError(Exception):
    """A kernel or backend file is missing or does not honour its contract."""


class Unsupported(Exception):
    """Raised by a backend or an implementation: this device/dtype/workload is not covered (reason in message)."""


class Unavailable(Exception):
    """Raised by a backend's available(): its package cannot be imported here (reason in message)."""


def require(module: str):
    """Import a backend's package, or raise Unavailable saying why: the common first line of available()."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise Unavailable(f"{module} is not importable in this environment: {exc}") from None
    except Exception as exc:  # packages that load native libraries at import: a broken install, not a kernel bug
        raise Unavailable(f"{module} failed to import: {type(exc).__name__}: {exc}") from None


def module_file(name: str) -> str:
    """Backend 'torch-compile' lives in torch_compile.py."""
    return name.replace("-", "_") + ".py"


def load_module(path: Path, contract: tuple[str, ...], what: str) -> ModuleType:
    if not path.is_file():
        raise PluginError(f"{path}: no such {what} file")
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    name = f"opmatrix_plugin_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules[name]
        raise
    missing = [attr for attr in contract if not hasattr(module, attr)]
    if missing:
        raise PluginError(f"{path}: a {what} must define {', '.join(contract)}; missing: {', '.join(missing)}")
    return module


def load_spec(kernels_dir: Path, kernel: str) -> ModuleType:
    return load_module(kernels_dir / kernel / "spec.py", SPEC_CONTRACT, "kernel spec")


def impl_path(kernels_dir: Path, kernel: str, backend: str) -> Path:
    return kernels_dir / kernel / module_file(backend)


def load_impl(kernels_dir: Path, kernel: str, backend: str) -> ModuleType:
    return load_module(impl_path(kernels_dir, kernel, backend), IMPL_CONTRACT, "kernel implementation")


def load_backend(backends_dir: Path, backend: str) -> ModuleType:
    return load_module(backends_dir / module_file(backend), BACKEND_CONTRACT, "backend adapter")


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
