"""The phases of one job, one function each: load -> coverage -> build -> first call -> correctness -> timing ->
extra views. The worker (opmatrix.incell.worker) runs them in order and records the phase reached; a phase that
ends the job raises JobFailed(status, error), and what it learns goes into the row (`result`) as it goes.

Timing is not a phase here: `prepare_timing` makes the zero-argument call, and the worker then serves timing bursts
of it to the cell runner (opmatrix.incell.timing_server), which interleaves every contestant in rounds. Nothing is
built or checked twice.
"""
from __future__ import annotations

import json
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable

from opmatrix.core import status
from opmatrix.core.jobs import Mode, WorkerTask
from opmatrix.core.result import Result, clean_float
from opmatrix.incell import correctness, integrity, measure, plugins
from opmatrix.incell.plugins import Backend, Built, Compiled, PluginError, Unavailable, Unsupported


class JobFailed(Exception):
    """The job ends here with this status (a row like any other, never an exception that escapes)."""

    def __init__(self, status_: str, error: str) -> None:
        super().__init__(error)
        self.status, self.error = status_, error


def failure_status(exc: BaseException, otherwise: str) -> str:
    """oom when the device ran out of memory (torch's OutOfMemoryError, CUDA_ERROR_OUT_OF_MEMORY through Triton or
    CuPy, hipErrorOutOfMemory), else `otherwise`."""
    if any(c.__name__ == "OutOfMemoryError" for c in type(exc).__mro__) or "out of memory" in str(exc).lower():
        return status.OOM
    return otherwise


def describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) < 2000 else text[:2000] + " ..."


@dataclass(frozen=True)
class Loaded:
    """The job's plugin files, loaded and checked, and its workload."""

    backend: Backend
    spec: ModuleType
    impl: ModuleType
    impl_file: str  # kernels/<op>/<file>.py, as messages name it
    workload: dict

    @property
    def returns_output(self) -> bool:
        return getattr(self.impl, "RETURNS_OUTPUT", False)


@dataclass(frozen=True)
class Case:
    """One set of inputs and the output buffer the kernel writes."""

    inputs: tuple
    out: object


def load_backend(task: WorkerTask, result: Result) -> Backend:
    """The backend first: a package that is not installed is `not_installed` before anything imports it."""
    backend = plugins.load_backend(Path(task.backends_dir), task.job.backend)
    try:
        result.backend_version = backend.available()
    except Unavailable as exc:
        raise JobFailed(status.NOT_INSTALLED, str(exc)) from None
    return backend


def check_coverage(backend: Backend, task: WorkerTask) -> None:
    """A compile-only job builds for a device no host has, so the backend's `covers` (about this host) is moot."""
    reason = None if task.mode is Mode.COMPILE else backend.covers(task.device)
    if reason:
        raise JobFailed(status.UNSUPPORTED, reason)


def load_kernel(task: WorkerTask, backend: Backend, result: Result) -> Loaded:
    job, kernels_dir = task.job, Path(task.kernels_dir)
    spec = plugins.load_spec(kernels_dir, job.kernel)
    impl_file = f"kernels/{job.kernel}/{plugins.module_file(job.backend)}"
    if not plugins.impl_path(kernels_dir, job.kernel, job.backend).is_file():
        raise JobFailed(status.UNSUPPORTED, f"no implementation: {impl_file} does not exist")
    impl = plugins.load_impl(kernels_dir, job.kernel, job.backend)
    workload = dict(job.params) if job.params else spec.WORKLOADS[job.workload]
    result.shape = spec.describe(workload)
    result.flops = float(spec.flops(workload))
    result.min_bytes = float(spec.min_bytes(workload, job.dtype))
    result.tolerance = float(spec.tolerance(job.dtype))
    return Loaded(backend, spec, impl, impl_file, workload)


def _invoke(make: Callable, loaded: Loaded, task: WorkerTask):
    """build / compile_for: Unsupported is a coverage answer, a PluginError a broken file, anything else a
    compile error."""
    job = task.job
    try:
        return make(loaded.workload, job.dtype, task.device, job.variant)
    except Unsupported as exc:
        raise JobFailed(status.UNSUPPORTED, str(exc)) from None
    except PluginError:
        raise
    except Exception as exc:
        raise JobFailed(failure_status(exc, status.COMPILE_ERROR),
                        describe(exc) + "\n" + traceback.format_exc(limit=-3)) from None


def build(loaded: Loaded, task: WorkerTask, result: Result) -> Built:
    built = plugins.built_from(_invoke(loaded.impl.build, loaded, task), Path(loaded.impl.__file__))
    result.config = json.dumps(built.config, sort_keys=True, default=str)
    result.compile_cache = built.cache
    return built


def compile_only(loaded: Loaded, task: WorkerTask, result: Result) -> None:
    """No host has the device: build (or lower) for it here, never run. Status compiles / lowers."""
    if not hasattr(loaded.impl, "compile_for"):
        raise JobFailed(status.NO_HOST, f"no host of this run has device {task.device.id!r}, and "
                        f"{loaded.impl_file} offers no compile-only build (compile_for)")
    start = time.perf_counter()
    compiled = _invoke(loaded.impl.compile_for, loaded, task)
    result.compile_s = time.perf_counter() - start
    if not isinstance(compiled, Compiled):
        raise PluginError(f"{loaded.impl_file}: compile_for returned {type(compiled).__name__}; it returns "
                          "opmatrix.kit.Compiled(status, what, config) (the helpers in opmatrix.kit.aot make one)")
    result.status = compiled.status
    result.error = f"no host has {task.device.id!r}: {compiled.what}, made on this host, never run"
    result.config = json.dumps(compiled.config, sort_keys=True, default=str)


def call(built: Built, case: Case, loaded: Loaded, task: WorkerTask, failure: str):
    """Run once and wait for the device. The result is `out`, unless the implementation declares
    RETURNS_OUTPUT: a framework op that allocates its own output (F.rms_norm) is measured as it is used,
    without a copy into `out`."""
    try:
        returned = built.fn(*case.inputs, case.out)
    except Exception as exc:
        raise JobFailed(failure_status(exc, failure), describe(exc)) from None
    try:
        measure.synchronize(task.device.torch)
    except Exception as exc:  # a device fault (illegal access) surfaces at the sync: never a compile error
        raise JobFailed(failure_status(exc, status.RUNTIME_ERROR), describe(exc)) from None
    if not loaded.returns_output:
        return case.out
    if returned is None:
        raise JobFailed(status.RUNTIME_ERROR, f"{loaded.impl_file} declares RETURNS_OUTPUT but its function "
                        "returned None")
    return returned


def first_call(loaded: Loaded, built: Built, task: WorkerTask) -> Case:
    """The first call includes JIT compilation for backends that compile lazily (torch.compile, Triton): its
    failure is then a compile error."""
    job, device = task.job, task.device
    inputs = loaded.spec.make_inputs(loaded.workload, job.dtype, device.torch, task.settings.seed)
    case = Case(inputs, loaded.spec.make_output(loaded.workload, job.dtype, device.torch))
    lazy = loaded.backend.compiles_on_first_call
    call(built, case, loaded, task, status.COMPILE_ERROR if lazy else status.RUNTIME_ERROR)
    return case


def check_correctness(loaded: Loaded, built: Built, case: Case, task: WorkerTask, result: Result) -> None:
    """Every trial: fresh seeded inputs and their reference computed from a pristine copy made before the call
    (opmatrix.incell.integrity), the output poisoned with NaN (an element the kernel does not write stays NaN and
    fails), then the output's form, the inputs left unchanged, and the norm and element-wise checks against fp64."""
    spec, job, device = loaded.spec, task.job, task.device
    verdict = correctness.Verdict(result.tolerance, *correctness.elementwise_tolerance(spec, job.dtype))
    for trial in range(task.settings.trials):
        case = Case(spec.make_inputs(loaded.workload, job.dtype, device.torch, task.settings.seed + 1 + trial),
                    case.out)
        kept = integrity.pristine(case.inputs)
        reference = spec.reference(kept, loaded.workload)
        integrity.require_informative(reference, spec.__file__)
        case.out.fill_(float("nan"))
        got = call(built, case, loaded, task, status.RUNTIME_ERROR)
        broke = integrity.misbehaved(got, case.out, case.inputs, kept)
        if broke:
            raise JobFailed(status.MISMATCH, broke)
        try:
            verdict.add(got, reference)
        except correctness.ShapeMismatch as exc:
            raise JobFailed(status.MISMATCH, str(exc)) from None
        if not verdict.finite:
            break
    result.trials, result.rel_err = verdict.trials, clean_float(verdict.rel_err)
    result.bad_elements = verdict.bad_elements
    result.worst_index = verdict.worst.where if verdict.bad_elements else ""
    if not verdict.passed:
        raise JobFailed(status.MISMATCH, verdict.explain())


def prepare_timing(loaded: Loaded, built: Built, task: WorkerTask, result: Result) -> integrity.TimedCall:
    """The zero-argument call a timer repeats, rotating over seeded input sets of its own (never a correctness
    trial's), with the checked calls the timing server makes after every burst."""
    spec, job, device = loaded.spec, task.job, task.device
    sets, note = integrity.make_sets(
        lambda seed: spec.make_inputs(loaded.workload, job.dtype, device.torch, seed),
        lambda: spec.make_output(loaded.workload, job.dtype, device.torch),
        lambda inputs: spec.reference(inputs, loaded.workload),
        task.settings.seed + integrity.SEED_OFFSET, device.torch)
    result.input_sets = len(sets)
    result.timing_notes = "; ".join(filter(None, [result.timing_notes, note]))
    tolerances = correctness.elementwise_tolerance(spec, job.dtype)

    def fresh(seed: int) -> tuple[tuple, object]:
        inputs = spec.make_inputs(loaded.workload, job.dtype, device.torch, seed)
        return inputs, integrity.reference_of(lambda kept: spec.reference(kept, loaded.workload), inputs)

    return integrity.TimedCall(built.fn, sets, loaded.returns_output, device.torch,
                               lambda: correctness.Verdict(result.tolerance, *tolerances), fresh,
                               task.settings.seed + integrity.FRESH_SEED_OFFSET)


def extra_views(timed_call: Callable[[], object], task: WorkerTask, result: Result) -> None:
    """Optional GPU views beside the event median; a failure is a note, never a failed row. CUPTI goes first:
    a graph capture that fails can leave the stream unusable."""
    settings, notes = task.settings, []
    if not task.device.is_gpu:
        return
    if settings.crosscheck:
        try:
            calls = int(min(200, max(5, settings.rep_ms / result.median_ms)))
            result.crosscheck_events_ms, result.cupti_ms = measure.crosscheck_cupti(timed_call, calls)
            result.cupti_diff_pct = 100.0 * (result.crosscheck_events_ms - result.cupti_ms) / result.cupti_ms
        except Exception as exc:
            notes.append(f"CUPTI cross-check failed: {describe(exc)}")
    if result.median_ms < settings.cuda_graph_below_ms:
        try:
            result.graph_median_ms = measure.graph_replay(timed_call, settings.rep_ms).median_ms
        except Exception as exc:
            notes.append(f"CUDA-graph replay failed: {describe(exc)}")
    result.timing_notes = "; ".join(filter(None, [result.timing_notes, *notes]))
