"""A worker's tripwire: what the contestant's Python code must leave as it found it.

Taken in the worker before any plugin file is imported (a backend adapter runs code at import), checked again after
the build and after every burst of calls. Anything changed makes the row `suspect`, naming what changed:
- the clocks and the functions that time, synchronise and deliver calls: the `time` module, `builtins`, the
  opmatrix.incell modules' own globals (a function's code too), the CUDA event, stream and synchronisation
  functions, and the tensor methods the worker calls on the judge's buffers;
- the settings the toolchain pins: torch's intra- and inter-op thread counts, the toolchain's environment variables
  and the thread-count variables, the process's CPU affinity and priority;
- trace and profile hooks (a hook sees every frame: it could tell one call from another).

This is a tripwire, not the guarantee: code in the worker's process can defeat any check made in that process
(native code, or Python aimed at this module). What the judge checks from its own process (every output it reads,
its own clock, the worker's CPU time as the kernel accounts it) does not depend on it; docs/guarantees.md says
which check covers what. Stdlib only at import.
"""
from __future__ import annotations

import builtins
import os
import sys
import threading
import time
import types

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "CUDA_VISIBLE_DEVICES",
                    "HIP_VISIBLE_DEVICES")
TENSOR_METHODS = ("copy_", "fill_", "zero_", "set_", "data_ptr", "untyped_storage", "view", "__setitem__")
TORCH_FUNCTIONS = ("empty", "from_file", "as_tensor", "get_num_threads", "set_num_threads", "get_num_interop_threads")
CUDA_FUNCTIONS = ("synchronize", "current_stream", "default_stream", "is_initialized", "empty_cache", "Event", "Stream")


def _identity(value) -> tuple:
    """What must stay the same of one attribute: the object, and for a function its code, defaults and closure."""
    if isinstance(value, types.FunctionType):
        return (id(value), id(value.__code__), id(value.__defaults__), id(value.__kwdefaults__),
                id(value.__closure__))
    return (id(value),)


def _members(namespace, names=None) -> dict[str, tuple]:
    items = vars(namespace).items() if names is None else ((n, getattr(namespace, n, None)) for n in names)
    return {name: _identity(value) for name, value in items}


def _callables(module) -> tuple[str, ...]:
    """A module's functions and classes, not its data: time.tzset() rebinds time.tzname, and that is no timer."""
    return tuple(name for name, value in vars(module).items() if callable(value))


class Watch:
    def __init__(self, pinned_env: dict[str, str] | None = None) -> None:
        self.pinned = {k: v for k, v in (pinned_env or {}).items()}
        for name in THREAD_VARIABLES:
            self.pinned.setdefault(name, os.environ.get(name))
        self.snapshot = self._take()

    def _namespaces(self) -> dict[str, tuple]:
        spaces = {"time": (time, _callables(time)), "builtins": (builtins, _callables(builtins)),
                  "os": (os, ("sched_getaffinity", "getpid"))}
        for name, module in list(sys.modules.items()):
            if name.startswith("opmatrix.incell.") and module is not None:
                spaces[name] = (module, None)
        torch = sys.modules.get("torch")
        if torch is not None:
            spaces["torch"] = (torch, TORCH_FUNCTIONS)
            spaces["torch.Tensor"] = (torch.Tensor, TENSOR_METHODS)
            cuda = getattr(torch, "cuda", None)
            if cuda is not None:
                spaces["torch.cuda"] = (cuda, CUDA_FUNCTIONS)
                for cls in (cuda.Event, cuda.Stream, *cuda.Event.__mro__[1:-1]):
                    spaces[f"{cls.__module__}.{cls.__qualname__}"] = (cls, None)
        return spaces

    def _settings(self) -> dict[str, object]:
        found: dict[str, object] = {f"environment {k}": os.environ.get(k) for k in self.pinned}
        torch = sys.modules.get("torch")
        if torch is not None:
            found["torch.get_num_threads()"] = torch.get_num_threads()
            found["torch.get_num_interop_threads()"] = torch.get_num_interop_threads()
        if hasattr(os, "sched_getaffinity"):
            found["CPU affinity"] = sorted(os.sched_getaffinity(0))
        found["priority"] = os.getpriority(os.PRIO_PROCESS, 0)
        found["sys.gettrace()"] = sys.gettrace() is not None
        found["sys.getprofile()"] = sys.getprofile() is not None
        found["threading trace or profile hook"] = bool(getattr(threading, "_trace_hook", None)
                                                        or getattr(threading, "_profile_hook", None))
        monitoring = getattr(sys, "monitoring", None)
        if monitoring is not None:
            found["sys.monitoring tools"] = [t for t in range(6) if monitoring.get_tool(t) is not None]
        return found

    def _take(self) -> tuple[dict, dict]:
        members = {space: _members(obj, names) for space, (obj, names) in self._namespaces().items()}
        return members, self._settings()

    def changed(self) -> str:
        """'' when nothing watched changed since the snapshot, else what did (the first few)."""
        members, settings = self.snapshot
        found = []
        for key, was in settings.items():
            now = self._settings().get(key)
            if now != was:
                found.append(f"{key} {was!r} -> {now!r}")
        for space, (obj, names) in self._namespaces().items():
            before = members.get(space)
            if before is None:
                continue
            now = _members(obj, names)
            for name, identity in before.items():
                if now.get(name) != identity:
                    found.append(f"{space}.{name} replaced" if name in now else f"{space}.{name} removed")
        return "; ".join(found[:5]) + (f"; and {len(found) - 5} more" if len(found) > 5 else "")

    def check_environment(self, env: dict[str, str], source: str) -> str:
        """'' when `env` (what a backend adapter's environment() asks for) leaves the pinned variables alone."""
        clash = [k for k in env if k in self.pinned and env[k] != self.pinned[k]]
        return (f"{source} sets {', '.join(clash)}, which the toolchain pins" if clash else "")
