"""The cell runner: run every job of one cell, each in a fresh worker process with a time limit.

`run_cell(plan)` yields one Result per job, whatever happens to the worker: a segfault becomes `crashed`, a hang
`timeout`, and the next job goes on. Run as `python -m opmatrix.incell.cell_runner PLAN.json` inside the cell's
environment, it prints each result as one `OPMATRIX-RESULT {json}` line the moment it exists. Stdlib only.

Each job gets a scratch folder named by its full key, emptied before the job starts, and each worker start an
attempt id: a result file is trusted only when it carries the attempt of the worker just run, so a file left by an
earlier run, attempt or job can never become this job's row.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
import shutil
import sys
import uuid
from pathlib import Path
from typing import Iterator

from opmatrix.core import metrics, status
from opmatrix.core.jobs import CellPlan, DeviceInfo, JobSpec, Mode, WorkerTask
from opmatrix.core.result import Result
from opmatrix.incell import plugins
from opmatrix.incell.processes import die_with_parent, run_limited, signal_name, tail

RESULT_PREFIX = "OPMATRIX-RESULT "
PROBE_TIMEOUT_S = 300  # facts (imports) and ceilings (a few large matmuls)
FACT_FIELDS = ("host", "device_name", "driver", "runtime", "python", "torch", "tilelang", "triton")


def probe(module: str, args: list[str], scratch: Path) -> dict | None:
    """Run `python -m opmatrix.incell.<module> OUT ARGS...` in this environment with a time limit; its JSON."""
    out = scratch / f"{module}.json"
    out.unlink(missing_ok=True)
    code, _ = run_limited([sys.executable, "-m", f"opmatrix.incell.{module}", str(out), *args], dict(os.environ),
                          scratch / f"{module}.log", PROBE_TIMEOUT_S)
    return json.loads(out.read_text()) if code == 0 and out.is_file() else None


def read_result(path: Path, attempt: str) -> Result | None:
    """The worker's result, only if it is this attempt's (and whole)."""
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or data.get("attempt") != attempt:
            return None
        return Result.from_dict(data.get("result"), identified=False)
    except (OSError, ValueError):  # absent, cut short, or not a valid row (RowError is a ValueError)
        return None


def write_result(path: Path, attempt: str, result: Result) -> None:
    """Atomic: the cell runner sees the whole file or none."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"attempt": attempt, "result": json.loads(result.to_json())}))
    tmp.replace(path)


class CellRunner:
    def __init__(self, plan: CellPlan) -> None:
        self.plan = plan
        self.scratch = Path(plan.scratch_dir)
        self.scratch.mkdir(parents=True, exist_ok=True)
        d = plan.cell.device
        self.facts = probe("facts", [d.vendor], self.scratch) or {
            "runtime": f"facts probe failed: {tail(self.scratch / 'facts.log')[-300:]}"}
        arch = d.arch if d.arch != "auto" else self.facts.get("arch", "")
        self.device = DeviceInfo(d.id, d.vendor, arch, self.facts.get("device_name", ""))
        dtypes = sorted({j.dtype for j in plan.jobs})
        self.ceilings = ({} if plan.mode is Mode.COMPILE or not plan.jobs
                         else probe("ceilings", [self.device.torch, *dtypes], self.scratch) or {})

    def results(self) -> Iterator[Result]:
        for job in self.plan.jobs:
            if self.plan.past_deadline():
                return  # not started, no row: `opmatrix run --resume` picks these jobs up
            yield self.run_job(job)

    def job_folder(self, job: JobSpec) -> Path:
        """This job's own scratch, emptied: nothing from an earlier run, attempt or job survives into it."""
        folder = self.scratch / "jobs" / self.plan.key(job).folder_name()
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        return folder

    def run_job(self, job: JobSpec) -> Result:
        folder = self.job_folder(job)
        attempt = uuid.uuid4().hex
        task = WorkerTask(job=job, mode=self.plan.mode, device=self.device, kernels_dir=self.plan.kernels_dir,
                          backends_dir=self.plan.backends_dir, settings=self.plan.settings, attempt=attempt)
        (folder / "task.json").write_text(task.to_json())
        result_path = folder / "result.json"
        env = dict(os.environ)
        started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        try:
            backend = plugins.load_backend(Path(self.plan.backends_dir), job.backend)
            env.update(backend.environment(self.device, folder / "cache"))
        except Exception as exc:
            return self._finish(job, Result(status=status.ENV_ERROR, phase="load",
                                            error=f"backend adapter failed to load: {type(exc).__name__}: {exc}"),
                                started, 0.0)
        code, elapsed = run_limited([sys.executable, "-m", "opmatrix.incell.worker", str(folder / "task.json"),
                                     str(result_path)], env, folder / "worker.log", job.timeout_s)
        result = read_result(result_path, attempt)  # whole and this attempt's, even if the exit crashed
        if result is None:
            phase_file = folder / "phase"
            phase = phase_file.read_text() if phase_file.is_file() else "start"
            if code is None:
                result = Result(status=status.TIMEOUT, phase=phase,
                                error=f"killed after {job.timeout_s:g} s in phase {phase}")
            else:
                how = f"killed by {signal_name(code)}" if code < 0 else f"exited with code {code}"
                result = Result(status=status.CRASHED, phase=phase,
                                error=f"worker {how} in phase {phase} without a result")
        result.stderr_tail = tail(folder / "worker.log")
        return self._finish(job, result, started, elapsed)

    def _finish(self, job: JobSpec, result: Result, started: str, elapsed: float) -> Result:
        """Stamp the row with the job's identity and the cell's facts, then derive its metrics."""
        facts = {key: str(self.facts.get(key, "")) for key in FACT_FIELDS}
        identity = dict(self.plan.identity(job), arch=self.device.arch)  # 'auto' resolved on this host
        stamped = dataclasses.replace(result, **identity, **facts, started_at=started, duration_s=elapsed)
        return metrics.derive(stamped, self.ceilings)


def run_cell(plan: CellPlan) -> Iterator[Result]:
    """The cell runner as a function: plan (cell, jobs, settings, folders) -> results, one per job."""
    yield from CellRunner(plan).results()


def main(argv: list[str]) -> int:
    die_with_parent()
    plan = CellPlan.from_json(Path(argv[0]).read_text())
    for result in run_cell(plan):
        sys.stdout.write(RESULT_PREFIX + result.to_json() + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
