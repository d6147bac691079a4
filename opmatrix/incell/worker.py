"""One job in one fresh process: load, check coverage, build, check correctness, time.

Run as `python -m opmatrix.incell.worker TASK.json RESULT.json` by the cell runner (opmatrix.incell.servers), which
then times every worker that passed correctness in rounds with the others (opmatrix.incell.timing_server). The cell runner starts one per job with a time
limit, so a segfault, a hang or a sticky device error ends this process only. The phase reached is written to the
file `phase` beside RESULT.json as the job advances, so a crash can be reported with where it happened. The phases
themselves are opmatrix.incell.phases; this module runs them in order and turns every ending into a row.
"""
from __future__ import annotations

import statistics
import sys
import time
import traceback
from pathlib import Path

from opmatrix.core import status
from opmatrix.core.jobs import Mode, WorkerTask
from opmatrix.core.result import Result
from opmatrix.incell import integrity, measure, phases, timing_server
from opmatrix.incell.result_file import write_result
from opmatrix.incell.phases import JobFailed, describe
from opmatrix.incell.plugins import PluginError
from opmatrix.incell.processes import die_with_parent


class Worker:
    def __init__(self, task: WorkerTask, result_path: Path) -> None:
        self.task = task
        self.result_path = result_path
        self.phase_path = result_path.parent / "phase"
        self.result = Result(kernel=task.job.kernel, workload=task.job.workload, dtype=task.job.dtype,
                             backend=task.job.backend, variant=task.job.variant, compile_cache="cold")

    def phase(self, name: str) -> None:
        self.result.phase = name
        self.phase_path.write_text(name)

    def run(self) -> Result:
        """Every ending is a row: a phase's verdict, a plugin file that breaks its contract (env_error, with the
        loader's message naming file and fix), or an unexpected exception (with its traceback)."""
        try:
            self._run()
        except JobFailed as failed:
            self.result.status, self.result.error = failed.status, failed.error
        except PluginError as exc:
            self.result.status, self.result.error = status.ENV_ERROR, str(exc)
        except Exception as exc:  # a broken plugin file or harness step: still a row, never a lost job
            self.result.status = status.ENV_ERROR if self.result.phase == "load" else status.RUNTIME_ERROR
            self.result.error = f"in phase {self.result.phase}: {describe(exc)}\n{traceback.format_exc(limit=-4)}"
        return self.result

    def _run(self) -> None:
        task, result = self.task, self.result
        self.phase("load")
        backend = phases.load_backend(task, result)
        phases.check_coverage(backend, task)
        loaded = phases.load_kernel(task, backend, result)
        self.phase("build")
        if task.mode is Mode.COMPILE:
            phases.compile_only(loaded, task, result)
            self.phase("done")
            return
        start = time.perf_counter()
        built = phases.build(loaded, task, result)
        self.phase("first_call")
        case = phases.first_call(loaded, built, task)
        result.compile_s = time.perf_counter() - start
        self.phase("correctness")
        phases.check_correctness(loaded, built, case, task, result)
        if not backend.timed(task.device):
            result.timer, result.status = "correctness-only", status.OK
            return
        self.phase("timing")
        timed_call = phases.prepare_timing(loaded, built, task, result)
        measure.release_cached(task.device.torch)
        replies = timing_server.serving()
        if replies is None:
            raise JobFailed(status.RUNTIME_ERROR, "timing needs a cell runner: start this worker through "
                            "opmatrix.incell.servers.Server, which times it in rounds with the others")
        result.status = status.OK
        write_result(self.result_path, task.attempt, result)  # kept if the worker dies during the rounds
        samples = timing_server.serve(timed_call, task.device, replies)
        result.timed_checks = timed_call.checks.passed
        try:
            timed_call.judge()
        except integrity.Cheat as cheat:
            raise JobFailed(cheat.status, cheat.error) from None
        if samples:  # the extra views (graph replay, CUPTI) are chosen by the call's time
            result.median_ms = statistics.median(samples)
            phases.extra_views(timed_call, task, result)
        self.phase("done")


def main(argv: list[str]) -> int:
    die_with_parent()
    task = WorkerTask.from_json(Path(argv[0]).read_text())
    result_path = Path(argv[1])
    result = Worker(task, result_path).run()
    write_result(result_path, task.attempt, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
