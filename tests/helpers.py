"""Plugin folders and jobs for the worker's tests: a job run by the worker in this process, or in a worker process."""
from __future__ import annotations

import os
import shutil
import textwrap
import uuid
from pathlib import Path

from opmatrix.core.jobs import DeviceInfo, JobSpec, Mode, Settings, WorkerTask
from opmatrix.core.result import Result
from opmatrix.incell import plugins
from opmatrix.incell.cell_runner import read_result
from opmatrix.incell.servers import Server
from opmatrix.incell.worker import Worker
from tests.conftest import PROBE_SPEC, REPO, probe_adapter

CPU = DeviceInfo("cpu", "cpu", "x86_64", "test cpu")


def plugin_root(root: Path, impls: dict[str, str], adapters: dict[str, str] | None = None,
                kernel: str = "probe", spec: str = PROBE_SPEC) -> Path:
    """root/kernels/<kernel>/{spec.py, <name>.py} and root/backends/<name>.py (probe_adapter() unless given)."""
    (root / "kernels" / kernel).mkdir(parents=True, exist_ok=True)
    (root / "backends").mkdir(exist_ok=True)
    (root / "kernels" / kernel / "spec.py").write_text(spec)
    for name, code in impls.items():
        (root / "kernels" / kernel / f"{name}.py").write_text(textwrap.dedent(code))
        adapter = (adapters or {}).get(name, probe_adapter())
        (root / "backends" / f"{name}.py").write_text(textwrap.dedent(adapter))
    return root


def copy_plugins(root: Path, kernel: str, files: list[str], backends: list[str]) -> None:
    """The committed kernels/<kernel>/<files> and backends/<backends>.py, copied under root."""
    (root / "kernels" / kernel).mkdir(parents=True, exist_ok=True)
    (root / "backends").mkdir(exist_ok=True)
    for name in files:
        shutil.copy(REPO / "kernels" / kernel / name, root / "kernels" / kernel / name)
    for name in backends:
        shutil.copy(REPO / "backends" / f"{name}.py", root / "backends" / f"{name}.py")


def _task(root: Path, backend: str, kernel: str, workload: str, dtype: str, mode: Mode,
          device: DeviceInfo) -> tuple[WorkerTask, Path]:
    job = JobSpec(kernel, workload, dtype, backend, "default", 120)
    task = WorkerTask(job=job, mode=mode, device=device, kernels_dir=str(root / "kernels"),
                      backends_dir=str(root / "backends"), settings=Settings(trials=3, warmup_ms=1, rep_ms=5),
                      attempt=uuid.uuid4().hex)
    folder = root / "jobs" / f"{kernel}-{backend}-{workload}-{dtype}"
    folder.mkdir(parents=True, exist_ok=True)
    return task, folder


def worker_row(root: Path, backend: str, kernel: str = "probe", workload: str = "quick", dtype: str = "float32",
               mode: Mode = Mode.RUN, device: DeviceInfo = CPU) -> Result:
    """One job through the worker, in this process (its phases, not a subprocess)."""
    task, folder = _task(root, backend, kernel, workload, dtype, mode, device)
    return Worker(task, folder / "result.json").run()


def worker_process_row(root: Path, backend: str, kernel: str, workload: str, dtype: str) -> Result | None:
    """One CPU job through a worker process, as the cell runner starts it (a timing server with the backend's
    environment and a time limit), finished without timing rounds, and its row as the cell runner reads it back;
    the cell's own probes (facts, ceilings) are skipped."""
    task, folder = _task(root, backend, kernel, workload, dtype, Mode.RUN, CPU)
    env = dict(os.environ, **plugins.load_backend(root / "backends", backend).environment(CPU, folder / "cache"))
    server = Server(task, folder, env)
    if server.wait_ready(task.job.timeout_s):  # passed correctness: no timing bursts asked, just its row
        server.finish(task.job.timeout_s)
    return read_result(folder / "result.json", task.attempt)
