"""The worker's own phases, one function each: load the backend adapter (its environment, its version, whether it
covers the device), load the implementation, build it, or build it for a device no host has (compile-only). A phase
that ends the job raises JobFailed(status, error): the worker reports it and the judge makes the row.

Correctness and timing are not the worker's: the judge (opmatrix.incell.judge, in the cell runner) hands the built
function its inputs, checks its outputs and keeps the clock. Nothing here sees a reference or a seed.
"""
from __future__ import annotations

import json
import os
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable

from opmatrix.core import status
from opmatrix.core.jobs import Mode, WorkerTask
from opmatrix.incell import plugins
from opmatrix.incell.plugins import Backend, Built, Compiled, PluginError, Unavailable, Unsupported


class JobFailed(Exception):
    """The job ends here with this status (a row like any other, never an exception that escapes)."""

    def __init__(self, status_: str, error: str) -> None:
        super().__init__(error)
        self.status, self.error = status_, error


def failure_status(exc: BaseException, otherwise: str) -> str:
    """oom when the device or the host ran out of memory (torch's OutOfMemoryError, CUDA_ERROR_OUT_OF_MEMORY
    through Triton or CuPy, hipErrorOutOfMemory, Python's MemoryError, an allocator's "can't allocate memory"),
    else `otherwise`."""
    names = {c.__name__ for c in type(exc).__mro__}
    text = str(exc).lower()
    if names & {"OutOfMemoryError", "MemoryError"} or "out of memory" in text or "can't allocate memory" in text:
        return status.OOM
    return otherwise


def describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) < 2000 else text[:2000] + " ..."


def line_in(exc: BaseException, path: Path) -> int | None:
    """The line of `path` that `exc` was raised at: the innermost frame of its traceback inside that file (an import
    it makes, a call at module level), or a SyntaxError's own line when the file does not parse; None when the
    traceback never passed through it."""
    path = Path(path).resolve()
    if isinstance(exc, SyntaxError) and exc.filename and Path(exc.filename).resolve() == path:
        return exc.lineno
    inside = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == path]
    return inside[-1].lineno if inside else None


def import_failed(exc: BaseException, path: Path, shown: str) -> str:
    """Why a plugin file failed to import, as a row's reason: `kernels/softmax/torch_compile.py:3:
    ModuleNotFoundError: No module named 'torhc'` (`shown` is the file as messages name it, the line the innermost
    one inside it), then the traceback's last frames on the lines below for whoever reads results.jsonl."""
    line = line_in(exc, path)
    where = f"{shown}:{line}" if line is not None else shown
    frames = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-4)).rstrip()
    return f"{where}: {describe(exc)}\n{frames}"


@dataclass(frozen=True)
class Loaded:
    """The job's plugin files, loaded and checked."""

    backend: Backend
    impl: ModuleType
    impl_file: str  # kernels/<op>/<file>.py, as messages name it

    @property
    def returns_output(self) -> bool:
        return getattr(self.impl, "RETURNS_OUTPUT", False)


def load_backend(task: WorkerTask, check_environment: Callable[[dict], str]) -> tuple[Backend, str]:
    """The backend adapter, its environment applied to this process (compiler caches pointed into the job's own
    folder) and the version it imports. A package that is not installed is `not_installed` before anything else
    imports it; an environment that overrides what the toolchain pins is refused (`check_environment` says why)."""
    name = plugins.module_file(task.job.backend)
    try:
        backend = plugins.load_backend(Path(task.backends_dir), task.job.backend)
    except PluginError:
        raise
    except Exception as exc:  # the adapter's own import failed: an environment fault, named with its file and line
        first, _, frames = import_failed(exc, Path(task.backends_dir) / name, f"backends/{name}").partition("\n")
        raise PluginError(f"{first} (the backend adapter failed to load)\n{frames}") from None
    env = backend.environment(task.device, Path(task.cache_dir))
    clash = check_environment(env)
    if clash:
        raise PluginError(f"{backend.path}: {clash}; a backend sets only its own variables (compiler caches)")
    os.environ.update(env)
    try:
        version = backend.available()
    except Unavailable as exc:
        raise JobFailed(status.NOT_INSTALLED, str(exc)) from None
    return backend, version


def check_coverage(backend: Backend, task: WorkerTask) -> None:
    """A compile-only job builds for a device no host has, so the backend's `covers` (about this host) is moot."""
    reason = None if task.mode is Mode.COMPILE else backend.covers(task.device)
    if reason:
        raise JobFailed(status.UNSUPPORTED, reason)


def load_kernel(task: WorkerTask, backend: Backend) -> Loaded:
    job, kernels_dir = task.job, Path(task.kernels_dir)
    impl_file = f"kernels/{job.kernel}/{plugins.module_file(job.backend)}"
    path = plugins.impl_path(kernels_dir, job.kernel, job.backend)
    if not path.is_file():
        raise JobFailed(status.UNSUPPORTED, f"no implementation: {impl_file} does not exist")
    try:
        impl = plugins.load_impl(kernels_dir, job.kernel, job.backend)
    except PluginError:
        raise
    except Exception as exc:  # the implementation's own import failed: named with its file and line
        raise PluginError(import_failed(exc, path, impl_file)) from None
    return Loaded(backend, impl, impl_file)


def _invoke(make: Callable, task: WorkerTask):
    """build / compile_for: Unsupported is a coverage answer, a PluginError a broken file, anything else a
    compile error."""
    job = task.job
    try:
        return make(dict(task.workload), job.dtype, task.device, job.variant)
    except Unsupported as exc:
        raise JobFailed(status.UNSUPPORTED, str(exc)) from None
    except PluginError:
        raise
    except Exception as exc:
        raise JobFailed(failure_status(exc, status.COMPILE_ERROR),
                        describe(exc) + "\n" + traceback.format_exc(limit=-3)) from None


def build(loaded: Loaded, task: WorkerTask) -> Built:
    return plugins.built_from(_invoke(loaded.impl.build, task), Path(loaded.impl.__file__))


def compile_only(loaded: Loaded, task: WorkerTask) -> dict:
    """No host has the device: build (or lower) for it here, never run. Status compiles / lowers."""
    if not hasattr(loaded.impl, "compile_for"):
        raise JobFailed(status.NO_HOST, f"no host of this run has device {task.device.id!r}, and "
                        f"{loaded.impl_file} offers no compile-only build (compile_for)")
    start = time.perf_counter()
    compiled = _invoke(loaded.impl.compile_for, task)
    seconds = time.perf_counter() - start
    if not isinstance(compiled, Compiled):
        raise PluginError(f"{loaded.impl_file}: compile_for returned {type(compiled).__name__}; it returns "
                          "opmatrix.kit.Compiled(status, what, config) (the helpers in opmatrix.kit.aot make one)")
    return {"status": compiled.status, "compile_s": seconds,
            "error": f"no host has {task.device.id!r}: {compiled.what}, made on this host, never run",
            "config": json.dumps(compiled.config, sort_keys=True, default=str)}
