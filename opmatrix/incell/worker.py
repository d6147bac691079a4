"""One contestant in one fresh process: load its plugin files, build when asked, then run the calls the judge asks
for, on buffers the judge owns, and say what it did.

The worker decides nothing a verdict rests on. The judge (opmatrix.incell.judge, in the cell runner, where no
contestant code is ever imported) makes every input from seeds the worker never learns, keeps the references,
reads the outputs from its own memory, checks the worker's clock marks against its own clock and the worker's CPU
time as the kernel accounts it, and makes the row. The worker only reports; its tamper tripwire
(opmatrix.incell.tamper) is checked after the build and after every burst.

Run as `python -m opmatrix.incell.worker TASK.json` (or forked from the cell's fork server) with its end of the
channel (opmatrix.incell.channel) at the descriptor named by OPMATRIX_CHANNEL_FD. The exchange, judge first:
    worker -> {"event": "loaded", "backend_version", "timed", "returns_output", "lazy", "builds_vary"}
    judge  -> {"op": "build"}                 worker -> {"event": "built", "config", "cache"}
    judge  -> {"op": "compile"}               worker -> {"event": "compiled", "status", "error", "config", "compile_s"}
    judge  -> {"op": "arena", "arena", "slots"} + descriptors    worker -> {"event": "mapped"}
    judge  -> {"op": "calls", "slots": [i...], "values": [{position: value}...]}
                                              worker -> {"event": "called", "samples_ms", "marks", "timer"}
    judge  -> {"op": "views", "median_ms"}    worker -> {"event": "views", ...}     (GPU: graph replay, CUPTI)
    judge  -> {"op": "finish"}                the worker exits
Any step may answer {"event": "failed", "status", "error"} instead; the worker then exits.
"""
from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

from opmatrix.core import status
from opmatrix.core.jobs import Mode, WorkerTask
from opmatrix.incell import arena, measure, phases, tamper
from opmatrix.incell.channel import CHANNEL_FD_ENV, WorkerEnd
from opmatrix.incell.phases import JobFailed, describe, failure_status
from opmatrix.incell.plugins import PluginError
from opmatrix.incell.processes import die_with_parent


class Finished(Exception):
    """The judge said finish (or went away)."""


class Worker:
    def __init__(self, task: WorkerTask, channel: WorkerEnd) -> None:
        self.task, self.channel = task, channel
        self.loaded: phases.Loaded | None = None
        self.fn = None
        self.slots: list[tuple[list, object]] = []  # per slot: inputs (a tensor or None per position), output
        self.timer = measure.Timer(task.device.torch)
        self.watch: tamper.Watch | None = None

    def run(self) -> None:
        """Every ending is a message: a phase's verdict, a plugin file that breaks its contract (env_error, with
        the loader's message naming file and fix), or an unexpected exception (with its traceback)."""
        try:
            self._serve()
        except Finished:
            pass
        except JobFailed as failed:
            self._say_failed(failed.status, failed.error)
        except PluginError as exc:
            self._say_failed(status.ENV_ERROR, str(exc))
        except Exception as exc:  # a broken plugin file or harness step: still a row, never a lost job
            failed = status.ENV_ERROR if self.loaded is None else status.RUNTIME_ERROR
            self._say_failed(failed, f"{describe(exc)}\n{traceback.format_exc(limit=-4)}")

    def _say_failed(self, status_: str, error: str) -> None:
        try:
            self.channel.send({"event": "failed", "status": status_, "error": error[:8000]})
        except OSError:
            pass

    def _serve(self) -> None:
        task = self.task
        if task.mode is Mode.RUN:
            _import_framework(task.device.torch)
        self.watch = tamper.Watch(task.pinned_env)
        backend, version = phases.load_backend(task, lambda env: self.watch.check_environment(
            env, "its environment()"))
        phases.check_coverage(backend, task)
        self.loaded = phases.load_kernel(task, backend)
        self.channel.send({"event": "loaded", "backend_version": version, "timed": backend.timed(task.device),
                           "returns_output": self.loaded.returns_output, "lazy": backend.compiles_on_first_call,
                           "builds_vary": backend.builds_vary})
        while True:
            request, fds = self.channel.receive()
            op = request.get("op")
            if op == "finish":
                raise Finished
            handler = {"build": self._build, "compile": self._compile, "arena": self._arena, "calls": self._calls,
                       "views": self._views}.get(op)
            if handler is None:
                raise RuntimeError(f"the judge asked for {op!r}, which this worker does not know")
            self.channel.send(handler(request, fds))

    def _untouched(self) -> None:
        changed = self.watch.changed() if self.watch is not None else ""
        if changed:
            raise JobFailed(status.SUSPECT, f"changed what the harness times and checks with: {changed}")

    def _build(self, request: dict, fds: list[int]) -> dict:
        built = phases.build(self.loaded, self.task)
        self.fn = built.fn
        self._untouched()
        return {"event": "built", "config": json.dumps(built.config, sort_keys=True, default=str),
                "cache": built.cache}

    def _compile(self, request: dict, fds: list[int]) -> dict:
        return {"event": "compiled", **phases.compile_only(self.loaded, self.task)}

    def _arena(self, request: dict, fds: list[int]) -> dict:
        memory = arena.open_handed(request["arena"], fds)
        self.timer = measure.Timer(memory.device.type)  # the wall clock for buffers in host memory, else events
        self.slots = [([None if layout is None else arena.view(memory, layout) for layout in inputs],
                       arena.view(memory, out)) for inputs, out in request["slots"]]
        return {"event": "mapped"}

    def _calls(self, request: dict, fds: list[int]) -> dict:
        calls = []
        for slot, values in zip(request["slots"], request["values"]):
            inputs, out = self.slots[slot]
            calls.append((tuple(values[p] if t is None else t for p, t in enumerate(inputs)), out))
        lazy = self.loaded.backend.compiles_on_first_call and request.get("first")
        deliver = self._deliver(calls) if self.loaded.returns_output else None
        try:
            timed = self.timer.time_calls(self.fn, calls, deliver)
        except JobFailed:
            raise
        except Exception as exc:
            raise JobFailed(failure_status(exc, status.COMPILE_ERROR if lazy else status.RUNTIME_ERROR),
                            describe(exc)) from None
        self._untouched()
        measure.release_cached(self.task.device.torch)
        return {"event": "called", "samples_ms": timed.samples_ms, "marks": timed.marks, "timer": timed.timer,
                "waited_ms": timed.waited_ms}

    def _deliver(self, calls: list):
        """RETURNS_OUTPUT: the returned tensor, which must be a plain tensor of the output's form, copied into the
        judge's output buffer (outside the timed window)."""
        import torch

        def deliver(i: int, returned) -> None:
            out = calls[i][1]
            if type(returned) is not torch.Tensor:
                raise JobFailed(status.SUSPECT, f"{self.loaded.impl_file} declares RETURNS_OUTPUT and returned a "
                                f"{type(returned).__module__}.{type(returned).__qualname__}, not a plain "
                                "torch.Tensor: the judge reads plain tensors only")
            wrong = [f"{what} {mine} (the row's: {theirs})" for what, mine, theirs in (
                ("shape", tuple(returned.shape), tuple(out.shape)), ("dtype", returned.dtype, out.dtype),
                ("device", returned.device.type, out.device.type), ("layout", returned.layout, torch.strided))
                if mine != theirs]
            if wrong:
                raise JobFailed(status.MISMATCH, "the output has " + ", ".join(wrong))
            out.copy_(returned)
        return deliver

    def _views(self, request: dict, fds: list[int]) -> dict:
        """Optional GPU views beside the event times, on slot 0's buffers (informative only: unchecked calls); a
        failure is a note, never a failed row. CUPTI goes first: a graph capture that fails can leave the stream
        unusable."""
        settings, notes, found = self.task.settings, [], {"event": "views"}
        inputs, out = self.slots[0]
        values = request.get("values") or {}
        args = tuple(values.get(p) if t is None else t for p, t in enumerate(inputs))

        def call():
            return self.fn(*args, out)

        median_ms = float(request.get("median_ms") or 0.0)
        if settings.crosscheck and median_ms > 0:
            try:
                calls = int(min(200, max(5, settings.rep_ms / median_ms)))
                found["crosscheck_events_ms"], found["cupti_ms"] = measure.crosscheck_cupti(call, calls)
            except Exception as exc:
                notes.append(f"CUPTI cross-check failed: {describe(exc)}")
        if 0 < median_ms < settings.cuda_graph_below_ms:
            try:
                found["graph_median_ms"] = measure.graph_replay(call, settings.rep_ms)
            except Exception as exc:
                notes.append(f"CUDA-graph replay failed: {describe(exc)}")
        found["notes"] = notes
        return found


def _import_framework(torch_device: str) -> None:
    """torch before any plugin file, so that the tripwire watches it from the start; a CPU worker runs it with the
    thread count the toolchain pins (OMP_NUM_THREADS: a worker forked from the cell's fork server imported torch
    before its environment was set). A cell without torch: its backends import what they need themselves."""
    try:
        import torch
    except ImportError:
        return
    wanted = os.environ.get("OMP_NUM_THREADS", "")
    if torch_device == "cpu" and wanted.isdigit() and int(wanted) >= 1:
        torch.set_num_threads(int(wanted))


def main(argv: list[str]) -> int:
    die_with_parent()
    task = WorkerTask.from_json(Path(argv[0]).read_text())
    Worker(task, WorkerEnd(int(os.environ[CHANNEL_FD_ENV]))).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
