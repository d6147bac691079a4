"""Test helpers: probe kernels and plugin folders, matrices over them, one job run through a worker process and the
judge as the cell runner starts it, the default matrix's shape run on this host, and a report's rows and a progress
view's plans made without a run. Helpers of one group of test modules sit in modules of their own beside this one
(helpers_ray.py, report_pages.py, bisect_project.py, contestants.py, model_ops.py, verdict_runs.py,
gpu_tool_recordings.py, ...): no test module imports another (tests/unit/test_layering.py). The test modules live
in the lane folders below tests/ (tests/unit/test_lanes.py); the data they read stays here, named once below."""
from __future__ import annotations

import contextlib
import shutil
import textwrap
import uuid
from pathlib import Path
from types import SimpleNamespace

from opmatrix import paths
from opmatrix.core.jobs import (CellPlan, CellSpec, DeviceInfo, DeviceSpec, JobSpec, Mode, Settings, ToolchainSpec,
                                WorkerTask)
from opmatrix.core.result import Result
from opmatrix.incell import entry
from opmatrix.incell.rounds import Contestant
from opmatrix.incell.timed_rows import judged

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
DATA = TESTS / "data"  # recordings and other inputs the tests read, whatever lane folder they are in
GPU_TOOL_KERNELS = TESTS / "gpu_tools" / "kernels"  # the planted kernel of the GPU-tool tests (gpu_tools/README.md)
# A lightweight probe operator for scheduling and isolation tests: out = 2 * x on CPU tensors, whatever the device.
PROBE_SPEC = '''
WORKLOADS = {"small": {"n": 4096, "sleep": 0}, "quick": {"n": 256, "sleep": 0}, "slow": {"n": 256, "sleep": 8}}

def describe(w): return f"n={w['n']}"
def flops(w): return float(w["n"])
def min_bytes(w, dtype): return 8.0 * w["n"]
def tolerance(dtype): return 1e-6

def make_inputs(w, dtype, device, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(w["n"], generator=g, dtype=getattr(torch, dtype)),)

def make_output(w, dtype, device):
    import torch
    return torch.empty(w["n"], dtype=getattr(torch, dtype))

def reference(inputs, w):
    return inputs[0].double() * 2
'''


def probe_adapter(timed=True) -> str:
    """A backend adapter over the host's torch that states only available(): the contract's defaults cover every
    device and set no environment. Timed unless `timed` is false (correctness-only rows)."""
    return "def available():\n    import torch\n    return torch.__version__\n" + ("" if timed else "TIMED = False\n")


def write_plugins(root: Path, kernel: str, impls: dict[str, str], adapter: str) -> None:
    """kernels/<kernel>/{spec.py, <backend>.py...} and backends/<backend>.py under root."""
    (root / "kernels" / kernel).mkdir(parents=True)
    (root / "backends").mkdir()
    (root / "kernels" / kernel / "spec.py").write_text(PROBE_SPEC)
    for name, code in impls.items():
        (root / "kernels" / kernel / f"{name}.py").write_text(code)
        (root / "backends" / f"{name}.py").write_text(adapter)


def probe_matrix(root: Path, name: str, backends: list[str], workloads: list[str], timeout_s: float,
                 rep_ms: float) -> Path:
    """root/m.toml: the probe kernel (write_plugins) on this host's CPU through the host toolchain."""
    path = root / "m.toml"
    path.write_text(textwrap.dedent(f"""
        name = "{name}"
        backends = {backends!r}
        [run]
        timeout_s = {timeout_s}
        rep_ms = {rep_ms}
        kernels_dir = "kernels"
        backends_dir = "backends"
        [[device]]
        id = "cpu"
        vendor = "cpu"
        arch = "auto"
        [[toolchain]]
        name = "host"
        system = true
        [[kernel]]
        name = "probe"
        workloads = {{ cpu = {workloads!r} }}
        dtypes = {{ cpu = ["float32"] }}
        """).replace("'", '"'))
    return path


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
        shutil.copy(paths.BUILTIN_KERNELS / kernel / name, root / "kernels" / kernel / name)
    for name in backends:
        shutil.copy(paths.BUILTIN_BACKENDS / f"{name}.py", root / "backends" / f"{name}.py")


def worker_task(root: Path, backend: str, kernel: str = "probe", workload: str = "quick", dtype: str = "float32",
                device: DeviceInfo = CPU) -> tuple[WorkerTask, Path]:
    """A worker's task for one job of the plugins under root, and its emptied folder (for a Server of its own)."""
    job = JobSpec(kernel, workload, dtype, backend, "default", 120)
    folder = root / "jobs" / f"{kernel}-{backend}-{workload}-{dtype}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    task = WorkerTask(job=job, mode=Mode.RUN, device=device, kernels_dir=str(root / "kernels"),
                      backends_dir=str(root / "backends"), settings=Settings(trials=3), attempt=uuid.uuid4().hex,
                      workload={"n": 256, "sleep": 0}, cache_dir=str(folder / "cache"))
    return task, folder


def job_row(root: Path, backend: str, kernel: str = "probe", workload: str = "quick", dtype: str = "float32",
            mode: Mode = Mode.RUN, device: DeviceInfo = CPU, forks=None, settings: Settings | None = None) -> Result:
    """One job through a worker process and the judge, as the cell runner starts it (forked from `forks`, a fork
    server, where given): loaded, built, seated, its first call and correctness trials judged, then finished
    without timing rounds; its row. The cell's own probes (facts, ceilings) are skipped. Its folder:
    root/jobs/<kernel>-<backend>-<workload>-<dtype> (the backend's caches under cache/)."""
    job = JobSpec(kernel, workload, dtype, backend, "default", 120)
    cell = CellSpec(f"{device.id}.host", DeviceSpec(device.id, device.vendor, device.arch),
                    ToolchainSpec("host", system=True), "test")
    plan = CellPlan(run_id="job-row", cell=cell, jobs=(job,), settings=settings or Settings(trials=3),
                    kernels_dir=str(root / "kernels"), backends_dir=str(root / "backends"),
                    scratch_dir=str(root / "scratch"), mode=mode)
    folder = root / "jobs" / f"{kernel}-{backend}-{workload}-{dtype}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    group = entry.Group(plan, [job], device)
    try:
        started = entry.Starter(plan, device, forks, None, {}, lambda text: None).start(job, group, folder,
                                                                                       folder / "cache", twin=False)
        if isinstance(started, Contestant):  # ready to time: no rounds asked, just its row
            started.server.finish(job.timeout_s)
            started.end()
            return judged(started.row, started)
        return started
    finally:
        group.close()


CPU_DEVICE = """
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
"""
# Two toolchains over this interpreter's packages that differ only in the TileLang pin. The tests that use them
# name them alike, so that they share the two cell environments (an environment is reused on an exact match).
TILELANG_PINS = """
[[toolchain]]
name = "tl014"
system = true
packages = ["tilelang==0.1.14"]
[[toolchain]]
name = "tl015"
system = true
packages = ["tilelang==0.1.15"]
"""
DEFAULT_STYLE_DEVICES = {
    "cpu": CPU_DEVICE,
    "h200": """
[[device]]
id = "h200"
vendor = "nvidia"
arch = "sm_90"
name = "H200"
""",
    "mi300x": """
[[device]]
id = "mi300x"
vendor = "amd"
arch = "gfx942"
name = "MI300X"
""",
}
DEFAULT_STYLE = """
name = "default-style"
backends = ["torch", "torch-compile", "cutlass", "tilelang", "triton"]
[run]
timeout_s = 300
rep_ms = 20
max_rounds = 10  # no test reads the speed; torch.compile's speedup near the bar would ask for up to 30 rounds
{devices}
[[toolchain]]
name = "host"
system = true
[[kernel]]
name = "gemm_relu"
workloads = {{ cpu = ["tiny_ragged"], nvidia = ["square_4096"], amd = ["square_4096"] }}
dtypes = {{ cpu = ["float32"], nvidia = ["float16"], amd = ["bfloat16"] }}
[[kernel]]
name = "rmsnorm"
backends = ["torch", "tilelang", "triton"]
workloads = {{ cpu = ["ragged_1000"], nvidia = ["odd_5120"] }}
dtypes = {{ cpu = ["float32"], nvidia = ["bfloat16"] }}
[[kernel]]
name = "flash_attention"
backends = ["torch", "tilelang", "triton"]
workloads = {{ cpu = ["b1_h2_s127_d64_causal"], nvidia = ["b8_h32_s4096_d128_causal"] }}
dtypes = {{ cpu = ["float32"], nvidia = ["float16"] }}
[[exclude]]
kernel = "flash_attention"
variant = "tuned"
reason = "the same compile-only path as gemm_relu's tuned variant; saves a build"
[[exclude]]
kernel = "rmsnorm"
backend = "tilelang"
variant = "two_rows"
reason = "its sm_90a build is checked by test_compile_only_hopper.py's own test of it (ptxas report, row guards)"
[[exclude]]
kernel = "rmsnorm"
backend = "tilelang"
variant = "l2_prefetch"
reason = "its sm_90a build is checked by test_compile_only_hopper.py's own test of it (the prefetch, its guard)"
[[exclude]]
kernel = "rmsnorm"
backend = "torch"
variant = "llama"
reason = "no test reads it: a timed eager row on the CPU"
[[exclude]]
kernel = "flash_attention"
backend = "torch"
variant = "flash"
reason = "no test reads it (math and cudnn stand for the SDPA backends): a timed row on the CPU"
[[exclude]]
kernel = "flash_attention"
backend = "torch"
variant = "efficient"
reason = "no test reads it (math and cudnn stand for the SDPA backends)"
"""


def run_default_style(tmp_path, devices: list[str], extra: str = "", keep_scratch: bool = False):
    """The default matrix's shape (every kernel and backend, the CPU and the fleet devices h200 and mi300x) for
    the named devices, run on this host without Ray, less the variants no test reads (DEFAULT_STYLE's excludes) and
    with `extra` TOML appended (excludes naming the run's own devices); returns (run folder, its rows). With
    keep_scratch the jobs' folders stay under tmp_path/scratch/default-style/<cell>/jobs."""
    import pandas as pd

    from opmatrix.run import run
    from opmatrix.scheduling.local import LocalScheduler

    matrix = tmp_path / "default-style.toml"
    matrix.write_text(DEFAULT_STYLE.format(devices="".join(DEFAULT_STYLE_DEVICES[d] for d in devices)) + extra)
    run_dir = run(matrix, reports_dir=tmp_path / "reports", run_id="default-style", scratch_root=tmp_path / "scratch",
                  scheduler=LocalScheduler(), keep_scratch=keep_scratch)  # embedded Ray: test_ray_cluster.py
    return run_dir, pd.read_parquet(run_dir / "results.parquet")


@contextlib.contextmanager
def tilelang_cache_off():
    """TileLang's kernel cache off for the block (back on after, if it was): a cached binary comes without ptxas'
    report, and a test of the generated source must see this build's."""
    import tilelang

    was = tilelang.is_cache_enabled()
    tilelang.disable_cache()
    try:
        yield
    finally:
        if was:
            tilelang.enable_cache()


# Rows of a report built without running anything: one device, one kernel and workload, the fields a section reads.
REPORT_ROW = dict(device="h200", kernel="gemm", workload="w", dtype="float16", status="ok", timer="cuda-events",
                  rel_err=1e-4, tolerance=1e-2, trials=3, flops=2e12, min_bytes=1e9, compile_s=1.0,
                  compile_cache="cold")


def report_result(backend: str = "torch", toolchain: str = "a", **fields) -> Result:
    """One stored row of a report (REPORT_ROW, with `fields` over it)."""
    values = {**REPORT_ROW, **fields}
    return Result(run_id="r", cell=f"{values['device']}.{toolchain}", toolchain=toolchain, backend=backend, **values)


def report_frame(*results: Result):
    """Results as the store hands them to the report (NaN for missing numbers, speed-ups over torch derived)."""
    from opmatrix.store import add_speedup, frame

    return add_speedup(frame(list(results)), "torch")


def progress_plan(cell: str, device: str, jobs: int) -> SimpleNamespace:
    """What the progress view reads of a CellPlan: the cell, its device and how many jobs (its rival's too)."""
    return SimpleNamespace(cell=SimpleNamespace(id=cell, device=SimpleNamespace(id=device)),
                           all_jobs=lambda: [None] * jobs)


def progress_plans() -> list[SimpleNamespace]:
    """The plans of a run over REPORT_ROW's device and one more: h200.a (3 jobs) and mi300x.a (1 job)."""
    return [progress_plan("h200.a", "h200", 3), progress_plan("mi300x.a", "mi300x", 1)]
