"""The cell runner: run every job of one cell, each in a fresh worker process with a time limit.

`run_cell(plan)` yields one Result per job, whatever happens to the worker: a segfault becomes `crashed`, a hang
`timeout`, and the next job goes on. Run as `python -m opmatrix.incell.cell_runner PLAN.json` inside the cell's environment,
it prints each result as one `OPMATRIX-RESULT {json}` line the moment it exists. Stdlib only.
"""
from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

from opmatrix.core import status
from opmatrix.incell import plugins
from opmatrix.incell.ceilings import roofline_pct
from opmatrix.incell.plugins import DeviceInfo
from opmatrix.core.result import Result

RESULT_PREFIX = "OPMATRIX-RESULT "
STDERR_TAIL_CHARS = 4000
PROBE_TIMEOUT_S = 300  # facts (imports) and ceilings (a few large matmuls)


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-STDERR_TAIL_CHARS:].decode("utf-8", "replace")


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _run_process(args: list[str], env: dict, log: Path, timeout_s: float) -> tuple[int | None, float]:
    """Run in its own process group (so a timeout kills compilers it started too); None means timed out."""
    start = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return proc.wait(timeout=timeout_s), time.perf_counter() - start
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None, time.perf_counter() - start
        except BaseException:  # Ctrl-C: take the worker down with us, then propagate
            os.killpg(proc.pid, signal.SIGKILL)
            raise


def past_deadline(plan: dict) -> bool:
    """`opmatrix run --deadline-s`: no job starts after the plan's deadline (seconds since the epoch)."""
    return bool(plan.get("deadline")) and time.time() >= plan["deadline"]


def probe(module: str, args: list[str], scratch: Path) -> dict | None:
    """Run `python -m opmatrix.<module> OUT ARGS...` in this environment with a time limit; its JSON, or None."""
    out = scratch / f"{module}.json"
    code, _ = _run_process([sys.executable, "-m", f"opmatrix.incell.{module}", str(out), *args], dict(os.environ),
                           scratch / f"{module}.log", PROBE_TIMEOUT_S)
    return json.loads(out.read_text()) if code == 0 and out.is_file() else None


JOB_SETTINGS = ("trials", "seed", "warmup_ms", "rep_ms", "cuda_graph_below_ms", "crosscheck")


class CellRunner:
    def __init__(self, plan: dict) -> None:
        self.plan = plan
        self.cell = plan["cell"]
        self.scratch = Path(plan["scratch_dir"])
        self.scratch.mkdir(parents=True, exist_ok=True)
        d = self.cell["device"]
        self.facts = probe("facts", [d["vendor"]], self.scratch) or {
            "runtime": f"facts probe failed: {_tail(self.scratch / 'facts.log')[-300:]}"}
        arch = d["arch"] if d["arch"] != "auto" else self.facts.get("arch", "")
        self.device = DeviceInfo(d["id"], d["vendor"], arch, self.facts.get("device_name", ""))
        dtypes = sorted({j["dtype"] for j in plan["jobs"]})
        self.ceilings = ({} if plan.get("mode") == "compile" or not plan["jobs"]
                         else probe("ceilings", [self.device.torch, *dtypes], self.scratch) or {})

    def results(self) -> Iterator[Result]:
        for index, job in enumerate(self.plan["jobs"]):
            if past_deadline(self.plan):
                return  # not started, no row: `opmatrix run --resume` picks these jobs up
            yield self.run_job(index, job)

    def run_job(self, index: int, job: dict) -> Result:
        folder = self.scratch / f"job{index:04d}-{job['kernel']}-{job['backend']}-{job['variant']}"
        folder.mkdir(parents=True, exist_ok=True)
        settings = self.plan["settings"]
        payload = dict(job, mode=self.plan.get("mode", "run"), device=vars(self.device),
                       kernels_dir=self.plan["kernels_dir"],
                       backends_dir=self.plan["backends_dir"],
                       **{key: settings[key] for key in JOB_SETTINGS if key in settings})
        (folder / "job.json").write_text(json.dumps(payload))
        result_path = folder / "result.json"
        env = dict(os.environ)
        started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        try:
            backend = plugins.load_backend(Path(self.plan["backends_dir"]), job["backend"])
            env.update(backend.environment(self.device, folder / "cache"))
        except Exception as exc:
            return self._finish(job, Result(status=status.ENV_ERROR, phase="load",
                                            error=f"backend adapter failed to load: {type(exc).__name__}: {exc}"),
                                started, 0.0)
        code, elapsed = _run_process([sys.executable, "-m", "opmatrix.incell.worker", str(folder / "job.json"),
                                      str(result_path)], env, folder / "worker.log", job["timeout_s"])
        log_tail = _tail(folder / "worker.log")
        if result_path.is_file():
            result = Result.from_json(result_path.read_text())
        else:
            phase = (Path(str(result_path) + ".phase").read_text()
                     if Path(str(result_path) + ".phase").is_file() else "start")
            if code is None:
                result = Result(status=status.TIMEOUT, phase=phase,
                                error=f"killed after {job['timeout_s']:g} s in phase {phase}")
            else:
                how = f"killed by {_signal_name(code)}" if code < 0 else f"exited with code {code}"
                result = Result(status=status.CRASHED, phase=phase,
                                error=f"worker {how} in phase {phase} without a result")
        result.stderr_tail = log_tail
        return self._finish(job, result, started, elapsed)

    def _finish(self, job: dict, result: Result, started: str, elapsed: float) -> Result:
        for key in ("kernel", "workload", "dtype", "backend", "variant"):
            setattr(result, key, job[key])
        f, d = self.facts, self.device
        result.run_id, result.cell = self.plan["run_id"], self.cell["id"]
        result.device, result.toolchain = d.id, self.cell["toolchain"]["name"]
        result.env_hash, result.vendor, result.arch = self.cell["env_hash"], d.vendor, d.arch
        result.gpu_index = self.plan.get("gpu_index", "")
        for key in ("host", "device_name", "driver", "runtime", "python", "torch", "tilelang", "triton"):
            setattr(result, key, str(f.get(key, "")))
        result.started_at, result.duration_s = started, elapsed
        result.ceiling_tflops = self.ceilings.get("tflops", {}).get(result.dtype)
        result.ceiling_gbps = self.ceilings.get("copy_gbps")
        result.roofline_pct = roofline_pct(result.flops, result.min_bytes, result.median_ms, result.dtype,
                                           self.ceilings)
        return result


def run_cell(plan: dict) -> Iterator[Result]:
    """The cell runner as a function: plan (cell, jobs, settings, folders) -> results, one per job."""
    yield from CellRunner(plan).results()


def main(argv: list[str]) -> int:
    plan = json.loads(Path(argv[0]).read_text())
    for result in run_cell(plan):
        sys.stdout.write(RESULT_PREFIX + result.to_json() + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
