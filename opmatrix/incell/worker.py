"""One job in one fresh process: load, check coverage, build, check correctness, time.

Run as `python -m opmatrix.incell.worker TASK.json RESULT.json`. The cell runner starts one per job with a time
limit, so a segfault, a hang or a sticky device error ends this process only. The phase reached is written to the
file `phase` beside RESULT.json as the job advances, so a crash can be reported with where it happened.
"""
from __future__ import annotations

import json
import math
import statistics
import sys
import time
import traceback
from pathlib import Path

from opmatrix.core import status
from opmatrix.core.jobs import Mode, WorkerTask
from opmatrix.core.result import Result, clean_float
from opmatrix.incell import measure, plugins, timing_server
from opmatrix.incell.cell_runner import write_result
from opmatrix.incell.plugins import Unavailable, Unsupported
from opmatrix.incell.processes import die_with_parent


class JobFailed(Exception):
    def __init__(self, status_: str, error: str) -> None:
        super().__init__(error)
        self.status, self.error = status_, error


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) < 2000 else text[:2000] + " ..."


class Worker:
    def __init__(self, task: WorkerTask, result_path: Path) -> None:
        self.task, self.job, self.settings = task, task.job, task.settings
        self.result_path = result_path
        self.phase_path = result_path.parent / "phase"
        self.returns_output = False
        self.device = task.device
        self.result = Result(kernel=task.job.kernel, workload=task.job.workload, dtype=task.job.dtype,
                             backend=task.job.backend, variant=task.job.variant, compile_cache="cold")

    def phase(self, name: str) -> None:
        self.result.phase = name
        self.phase_path.write_text(name)

    def run(self) -> Result:
        try:
            self._run()
        except JobFailed as failed:
            self.result.status, self.result.error = failed.status, failed.error
        except Exception as exc:  # a broken plugin file or harness step: still a row, never a lost job
            self.result.status = status.ENV_ERROR if self.result.phase == "load" else status.RUNTIME_ERROR
            self.result.error = f"in phase {self.result.phase}: {_describe(exc)}\n{traceback.format_exc(limit=-4)}"
        return self.result

    def _run(self) -> None:
        task, job, res, dev = self.task, self.job, self.result, self.device
        self.phase("load")
        backend = plugins.load_backend(Path(task.backends_dir), job.backend)
        try:
            res.backend_version = str(backend.available())
        except Unavailable as exc:
            raise JobFailed(status.NOT_INSTALLED, str(exc)) from None
        compile_only = task.mode is Mode.COMPILE
        reason = None if compile_only else backend.covers(dev)
        if reason:
            raise JobFailed(status.UNSUPPORTED, reason)
        kernels_dir = Path(task.kernels_dir)
        spec = plugins.load_spec(kernels_dir, job.kernel)
        if not plugins.impl_path(kernels_dir, job.kernel, job.backend).is_file():
            raise JobFailed(status.UNSUPPORTED, f"no implementation: kernels/{job.kernel}/"
                            f"{plugins.module_file(job.backend)} does not exist")
        impl = plugins.load_impl(kernels_dir, job.kernel, job.backend)
        self.returns_output = bool(getattr(impl, "RETURNS_OUTPUT", False))
        workload = spec.WORKLOADS[job.workload]
        res.shape = spec.describe(workload)
        res.flops = float(spec.flops(workload))
        res.min_bytes = float(spec.min_bytes(workload, job.dtype))
        res.tolerance = float(spec.tolerance(job.dtype))

        if compile_only:
            self._compile_only(impl, workload)
            return
        start = time.perf_counter()
        fn = self._build(impl.build, workload)
        res.config = json.dumps(getattr(fn, "config", {}), sort_keys=True, default=str)
        res.compile_cache = getattr(fn, "compile_cache", "cold")  # a build may say it reused an earlier one

        self.phase("first_call")
        inputs = spec.make_inputs(workload, job.dtype, dev.torch, self.settings.seed)
        out = spec.make_output(workload, job.dtype, dev.torch)
        # The first call includes JIT compilation for backends that compile lazily (torch.compile, Triton).
        lazy = getattr(backend, "COMPILES_ON_FIRST_CALL", False)
        self._call(fn, inputs, out, status.COMPILE_ERROR if lazy else status.RUNTIME_ERROR)
        res.compile_s = time.perf_counter() - start

        self.phase("correctness")
        worst = 0.0
        for trial in range(self.settings.trials):
            inputs = spec.make_inputs(workload, job.dtype, dev.torch, self.settings.seed + 1 + trial)
            out.fill_(float("nan"))  # poison: an element the kernel does not write stays NaN and fails the check
            got = self._call(fn, inputs, out, status.RUNTIME_ERROR)
            ref = spec.reference(inputs, workload)
            err = float((got.double() - ref).norm() / ref.norm())
            worst = err if not math.isfinite(err) else max(worst, err)
            res.trials = trial + 1
            if not math.isfinite(worst):
                break
        res.rel_err = clean_float(worst)
        if not math.isfinite(worst) or worst > res.tolerance:
            raise JobFailed(status.MISMATCH, f"relative error {worst:.3g} > tolerance {res.tolerance:.3g} "
                            f"(worst of {res.trials} trials with fresh inputs; NaN = unwritten or non-finite)")

        timer = backend.timer(dev)
        if timer is None:
            res.timer = "correctness-only"
            res.status = status.OK
            return
        self.phase("timing")
        replies = timing_server.serving()
        if replies is None:
            raise JobFailed(status.RUNTIME_ERROR, "timing needs a cell runner: start this worker through "
                            "opmatrix.incell.servers.Server, which times it in rounds")
        res.status = status.OK
        write_result(self.result_path, self.task.attempt, res)  # kept if the worker dies during the rounds
        samples = timing_server.serve(lambda: fn(*inputs, out), dev, replies)
        if samples:
            res.median_ms = statistics.median(samples)
            self._extra_views(lambda: fn(*inputs, out))
        self.phase("done")

    def _extra_views(self, call) -> None:
        """Optional GPU views beside the event median; a failure is a note, never a failed row. CUPTI goes first:
        a graph capture that fails can leave the stream unusable."""
        settings, res, notes = self.settings, self.result, []
        if not self.device.is_gpu:
            return
        if settings.crosscheck:
            try:
                calls = int(min(200, max(5, settings.rep_ms / res.median_ms)))
                res.crosscheck_events_ms, res.cupti_ms = measure.crosscheck_cupti(call, calls)
                res.cupti_diff_pct = 100.0 * (res.crosscheck_events_ms - res.cupti_ms) / res.cupti_ms
            except Exception as exc:
                notes.append(f"CUPTI cross-check failed: {_describe(exc)}")
        if res.median_ms < settings.cuda_graph_below_ms:
            try:
                res.graph_median_ms = measure.graph_replay(call, settings.rep_ms).median_ms
            except Exception as exc:
                notes.append(f"CUDA-graph replay failed: {_describe(exc)}")
        res.timing_notes = "; ".join(notes)

    def _build(self, make, workload):
        """build / compile_for: Unsupported is a coverage answer, any other exception a compile error."""
        self.phase("build")
        try:
            return make(workload, self.job.dtype, self.device, self.job.variant)
        except Unsupported as exc:
            raise JobFailed(status.UNSUPPORTED, str(exc)) from None
        except Exception as exc:
            raise JobFailed(status.COMPILE_ERROR, _describe(exc) + "\n" + traceback.format_exc(limit=-3)) from None

    def _compile_only(self, impl, workload) -> None:
        """No host has the device: build (or lower) for it here, never run. Status compiles / lowers."""
        job, res, dev = self.job, self.result, self.device
        if not hasattr(impl, "compile_for"):
            raise JobFailed(status.NO_HOST, f"no host of this run has device {dev.id!r}, and "
                            f"kernels/{job.kernel}/{plugins.module_file(job.backend)} offers no "
                            "compile-only build (compile_for)")
        start = time.perf_counter()
        built = self._build(impl.compile_for, workload)
        res.compile_s = time.perf_counter() - start
        if built["status"] not in status.BUILD_ONLY:
            raise JobFailed(status.RUNTIME_ERROR, f"compile_for returned status {built['status']!r}, "
                            f"expected one of {status.BUILD_ONLY}")
        res.status = built["status"]
        res.error = f"no host has {dev.id!r}: {built['what']}, made on this host, never run"
        res.config = json.dumps(built.get("config", {}), sort_keys=True, default=str)
        self.phase("done")

    def _call(self, fn, inputs, out, failure: str):
        """Run once and wait for the device. The result is `out`, unless the implementation declares
        RETURNS_OUTPUT: a framework op that allocates its own output (F.rms_norm) is measured as it is used,
        without a copy into `out`."""
        try:
            returned = fn(*inputs, out)
            measure.synchronize(self.device.torch)
        except Exception as exc:
            raise JobFailed(failure, _describe(exc)) from None
        if not self.returns_output:
            return out
        if returned is None:
            raise JobFailed(status.RUNTIME_ERROR, "the implementation declares RETURNS_OUTPUT but returned None")
        return returned


def main(argv: list[str]) -> int:
    die_with_parent()
    task = WorkerTask.from_json(Path(argv[0]).read_text())
    result_path = Path(argv[1])
    result = Worker(task, result_path).run()
    write_result(result_path, task.attempt, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
