"""Issue 47 on the CPU: the tools' orchestration
(opmatrix.incell.gpu_tools) run against stand-ins for `ncu` and `compute-sanitizer` that print those recordings; the
one-line reasons where a tool cannot run; the process that calls a contestant once (opmatrix.incell.one_call), on
the CPU; the report's sections."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from types import SimpleNamespace

import pytest

from opmatrix import paths
from opmatrix.core import status
from opmatrix.core.jobs import DeviceInfo, JobSpec, Mode, Settings, WorkerTask
from opmatrix.core.result import Result
from opmatrix.incell import gpu_tools, ncu_summary
from opmatrix.report.markdown import table
from opmatrix.report.tools import PROFILE_TITLE, SANITIZER_TITLE, profile, sanitized
from tests.helpers import GPU_TOOL_KERNELS as PLANTED, REPO, report_frame, report_result
from tests.gpu_tool_recordings import DATA, recorded
H100 = DeviceInfo("h100", "nvidia", "sm_90", "NVIDIA H100 80GB HBM3")
CPU = DeviceInfo("cpu", "cpu", "x86_64")
MI300X = DeviceInfo("mi300x", "amd", "gfx942")


# -- the orchestration, against stand-ins for the tools -------------------------------------------------------------

FAKE_NCU = '''#!{python}
import json, os, pathlib, sys
args = sys.argv[1:]
with open(os.environ["FAKE_CALLS"], "a") as calls:
    calls.write(json.dumps({{"tool": "ncu", "args": args}}) + "\\n")
mode = os.environ["FAKE_NCU"]
csv = pathlib.Path(os.environ["FAKE_CSV"]).read_text().rpartition("rc=")[0]
if "--import" in args:
    print(csv)
    sys.exit(0)
if mode == "refuse":
    print("==PROF== Connected to process 9 (python)")
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters "
          "on the target device 0.")
    sys.exit(1)
pathlib.Path(args[args.index("-o") + 1] + ".ncu-rep").write_bytes(b"a report")
request = json.loads(pathlib.Path(args[-1]).read_text())
pathlib.Path(request["done"]).write_text("{{}}")
if mode == "csv":
    print(csv)
'''

FAKE_SANITIZER = '''#!{python}
import json, os, pathlib, sys
args = sys.argv[1:]
tool = args[args.index("--tool") + 1]
with open(os.environ["FAKE_CALLS"], "a") as calls:
    calls.write(json.dumps({{"tool": tool, "args": args,
                            "caching": os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING")}}) + "\\n")
text = pathlib.Path(os.environ["FAKE_" + tool.upper()]).read_text()
body, _, code = text.rstrip().rpartition("rc=")
request = json.loads(pathlib.Path(args[-1]).read_text())
pathlib.Path(request["done"]).write_text("{{}}")
print(body)
sys.exit(int(code))
'''


@pytest.fixture
def tools(tmp_path):
    """Stand-ins for ncu and compute-sanitizer on PATH; the environment a contestant's tools start with."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("ncu", FAKE_NCU), ("compute-sanitizer", FAKE_SANITIZER)):
        (bin_dir / name).write_text(text.format(python=sys.executable))
        (bin_dir / name).chmod(0o755)
    calls = tmp_path / "calls.jsonl"
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", FAKE_CALLS=str(calls),
               FAKE_CSV=str(DATA / "ncu-details.csv"), FAKE_NCU="csv",
               FAKE_MEMCHECK=str(DATA / "sanitizer-memcheck-oob.txt"),
               FAKE_RACECHECK=str(DATA / "sanitizer-racecheck-oob.txt"),
               FAKE_INITCHECK=str(DATA / "sanitizer-initcheck-oob.txt"))
    run_folder = tmp_path / "reports" / "r"
    folder = tmp_path / "scratch" / "job"
    folder.mkdir(parents=True)

    def apply(row: Result, device: DeviceInfo = H100, profile: str = "ncu", sanitize: bool = True, **extra):
        settings = SimpleNamespace(profile=profile, sanitize=sanitize)
        job = JobSpec("doubled", "n1m", "float32", row.backend, row.variant, 60)
        task = WorkerTask(job=job, mode=Mode.RUN, device=device, kernels_dir=str(PLANTED),
                          backends_dir=str(paths.BUILTIN_BACKENDS), settings=Settings(), attempt=uuid.uuid4().hex,
                          workload={"n": 1 << 20}, cache_dir=str(folder / "cache"))
        said = []
        found = gpu_tools.Tools(settings, device, run_folder / gpu_tools.PROFILES, said.append).apply(
            row, task, folder, sys.executable, dict(env, **extra), "h100.host-doubled-n1m-float32-triton-past_end")
        return found, said

    def called() -> list[dict]:
        return [json.loads(line) for line in calls.read_text().splitlines()] if calls.is_file() else []

    return SimpleNamespace(apply=apply, called=called, run_folder=run_folder, folder=folder)


def planted_row(**fields) -> Result:
    values = dict(kernel="doubled", workload="n1m", dtype="float32", backend="triton", variant="past_end",
                  status=status.OK, phase="done", median_ms=0.01)
    return Result(**{**values, **fields})


def test_a_profile_and_a_finding_land_in_the_row(tools):
    row, said = tools.apply(planted_row())
    summary = ncu_summary.summarize(recorded("ncu-details.csv")[0])
    assert row.profile == "ncu: " + summary.line()
    assert (row.ncu_kernels, row.ncu_kernel_ms, row.ncu_main_kernel) == (3, summary.kernel_ms, summary.main_kernel)
    assert row.ncu_report == "profiles/h100.host-doubled-n1m-float32-triton-past_end.ncu-rep"
    assert (tools.run_folder / row.ncu_report).read_bytes() == b"a report"
    # memcheck found nothing (the recording was inside torch's caching allocator), initcheck did: unsafe
    assert (row.status, row.phase) == (status.UNSAFE, "sanitize")
    assert row.sanitizer == "unsafe: memcheck 0 errors; racecheck 0 hazards; initcheck 512 errors"
    assert row.error.startswith("compute-sanitizer initcheck found 512 errors in one call (every tensor its own "
                                "cudaMalloc); the first: Uninitialized __global__ memory read of size 16 bytes at "
                                "past_the_end+0xb0 in oob.py:6")
    assert "\n" not in row.error and "\n" not in row.sanitizer and "\n" not in row.profile
    calls = tools.called()
    ncu = calls[0]["args"]
    for flag in ("--clock-control none", "--profile-from-start off", "--csv", "--page details", "-o"):
        assert flag in " ".join(ncu)
    assert [ncu[i + 1] for i, a in enumerate(ncu) if a == "--section"] == list(gpu_tools.NCU_SECTIONS)
    assert ncu[-3:-1] == ["-m", "opmatrix.incell.one_call"]
    sanitized_calls = calls[1:]
    assert [c["tool"] for c in sanitized_calls] == ["memcheck", "racecheck", "initcheck"]
    # every sanitized process: no caching allocator (each tensor its own cudaMalloc); memcheck pads allocations
    assert all(c["caching"] == "1" for c in sanitized_calls)
    assert "--padding" in sanitized_calls[0]["args"] and "--padding" not in sanitized_calls[2]["args"]
    request = json.loads((tools.folder / "sanitize-memcheck.json").read_text())
    assert request["purpose"] == "sanitize" and request["task"]["job"]["variant"] == "past_end"
    assert any("Nsight Compute" in s for s in said) and any("compute-sanitizer" in s for s in said)


def test_an_honest_call_is_clean_and_stays_ok(tools):
    honest = str(DATA / "sanitizer-memcheck-honest.txt")
    row, _ = tools.apply(planted_row(variant="default"), profile="none", FAKE_INITCHECK=honest, FAKE_MEMCHECK=honest)
    assert (row.status, row.error, row.profile) == (status.OK, "", "")
    assert row.sanitizer == "clean: memcheck 0 errors; racecheck 0 hazards; initcheck 0 errors"


def test_a_report_that_ncu_printed_nothing_of_is_read_back(tools):
    row, _ = tools.apply(planted_row(), sanitize=False, FAKE_NCU="import")
    assert row.profile.startswith("ncu: 3 kernels") and row.sanitizer == ""
    assert any("--import" in c["args"] for c in tools.called())


def test_a_host_that_refuses_the_counters_says_so_in_one_line(tools):
    row, _ = tools.apply(planted_row(), sanitize=False, FAKE_NCU="refuse")
    assert row.profile.startswith("not run: this host refuses GPU performance counters to this user "
                                  "(ERR_NVGPUCTRPERM)")
    assert row.status == status.OK and row.ncu_kernels == 0 and row.ncu_report == ""


@pytest.mark.parametrize("device, why", [
    (CPU, "not run: no GPU in this cell (a CPU cell)"),
    (MI300X, "not run: ncu is NVIDIA's and this cell's device is amd (ROCm): no counterpart is wired"),
])
def test_where_the_tools_cannot_run_the_row_says_why(tools, device, why):
    row, _ = tools.apply(planted_row(), device=device)
    assert row.profile == why
    assert row.sanitizer == why.replace("ncu", "compute-sanitizer")
    assert row.status == status.OK and tools.called() == []


def test_a_tool_that_is_not_installed(tools, monkeypatch, tmp_path):
    monkeypatch.setattr(gpu_tools, "CUDA_BIN", str(tmp_path / "no-cuda"))
    row, _ = tools.apply(planted_row(), PATH=str(tmp_path / "empty"), CUDA_HOME="")
    assert row.profile == f"not run: ncu is not on PATH (nor in $CUDA_HOME/bin or {tmp_path / 'no-cuda'})"
    assert row.sanitizer.startswith("not run: compute-sanitizer is not on PATH")
    assert row.status == status.OK


def test_only_an_ok_row_is_looked_at(tools):
    row = planted_row(status=status.MISMATCH, error="wrong")
    assert tools.apply(row)[0] == row and tools.called() == []


def test_a_call_that_does_not_complete_is_a_failure_of_the_tool_not_of_the_row(tools, tmp_path):
    crashed = tmp_path / "crashed.txt"
    crashed.write_text("========= COMPUTE-SANITIZER\nRuntimeError: CUDA driver initialization failed\nrc=1\n")
    row, _ = tools.apply(planted_row(), profile="none", FAKE_MEMCHECK=str(crashed),
                         FAKE_INITCHECK=str(DATA / "sanitizer-memcheck-honest.txt"))
    assert row.status == status.OK
    assert row.sanitizer.startswith("failed: memcheck: the call did not complete (exit code 1)")


# -- the process that calls a contestant once ----------------------------------------------------------------------

@pytest.mark.parametrize("purpose", ["profile", "sanitize"])
def test_one_call_builds_the_contestant_and_calls_it_on_the_cpu(tmp_path, purpose):
    job = JobSpec("doubled", "small", "float32", "torch", "default", 60)
    task = WorkerTask(job=job, mode=Mode.RUN, device=CPU, kernels_dir=str(PLANTED),
                      backends_dir=str(paths.BUILTIN_BACKENDS), settings=Settings(), attempt="a",
                      workload={"n": 4096}, cache_dir=str(tmp_path / "cache"))
    request, done = gpu_tools._request(tmp_path, purpose, task)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-m", "opmatrix.incell.one_call", str(request)], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(done.read_text())["called"] is True


def test_every_tensor_gets_an_allocation_of_its_own():
    torch = pytest.importorskip("torch")
    from opmatrix.incell.one_call import own_allocation

    both = torch.arange(8.0)
    first, second = both[:4], both[4:]  # two inputs a spec sliced out of one tensor: one allocation
    assert first.untyped_storage().data_ptr() == second.untyped_storage().data_ptr()
    a, b = own_allocation(first), own_allocation(second)
    assert a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr()
    assert a.untyped_storage().nbytes() == 16 and torch.equal(b, second)
    strided = torch.arange(12.0).reshape(3, 4).t()
    copied = own_allocation(strided)
    assert copied.stride() == strided.stride() and torch.equal(copied, strided)
    expanded = torch.arange(3.0).expand(4, 3)  # stride 0: its elements overlap
    dense = own_allocation(expanded)
    assert torch.equal(dense, expanded) and dense.untyped_storage().data_ptr() != expanded.untyped_storage().data_ptr()
    assert own_allocation(1e-6) == 1e-6


# -- the report ----------------------------------------------------------------------------------------------------

def test_the_report_shows_the_profile_beside_the_speed_up_and_the_reasons_once():
    summary = ncu_summary.summarize(recorded("ncu-details.csv")[0])
    profiled = report_result("triton", device="h100", profile="ncu: " + summary.line(), ncu_report="profiles/x.ncu-rep",
                             median_ms=0.5, speedup_vs_framework=1.5, **summary.fields())
    base = report_result("torch", device="h100", median_ms=0.75, profile="failed: ncu did not finish in 60 s")
    cpu = [report_result(b, device="cpu", median_ms=1.0, profile="not run: no GPU in this cell (a CPU cell)")
           for b in ("torch", "triton")]
    sec = profile(report_frame(profiled, base, *cpu))
    assert sec.title == PROFILE_TITLE and not sec.optional
    assert len(sec.rows) == 1
    row = dict(zip(sec.headers, sec.rows[0]))
    assert (row["backend"], row["speed-up"], row["kernel µs"], row["kernels"]) == ("triton", "1.50x", "70.56", 3)
    assert (row["SM %"], row["occupancy %"], row["registers"]) == ("56", "61", "44")
    assert row["report"] == "profiles/x.ncu-rep"
    assert row["top stall"] == "not_selected (34.5% of the cycles between issues)"
    assert sec.extra == ["not profiled: 1 row (h100): failed: ncu did not finish in 60 s",
                         "not profiled: 2 rows (cpu): not run: no GPU in this cell (a CPU cell)"]
    assert "| triton" in table(sec.headers, sec.rows)
    assert profile(report_frame(report_result("torch"))).optional  # a run that did not ask: left out


def test_the_report_lists_each_sanitized_row_and_the_unsafe_ones_first_finding():
    unsafe = report_result("triton", device="h100", status=status.UNSAFE, phase="sanitize",
                           error="compute-sanitizer memcheck found 1 error in one call; the first: Invalid read",
                           sanitizer="unsafe: memcheck 1 error; racecheck 0 hazards; initcheck 4096 errors")
    clean = report_result("torch", device="h100", sanitizer="clean: memcheck 0 errors; racecheck 0 hazards; "
                                                           "initcheck 0 errors")
    cpu = report_result("torch", device="cpu", sanitizer="not run: no GPU in this cell (a CPU cell)")
    sec = sanitized(report_frame(unsafe, clean, cpu))
    assert sec.title == SANITIZER_TITLE and "PYTORCH_NO_CUDA_MEMORY_CACHING=1" in sec.note
    rows = {r[4]: dict(zip(sec.headers, r)) for r in sec.rows}
    assert rows["triton"]["status"] == "unsafe"
    assert rows["triton"]["found"] == "memcheck 1 error; racecheck 0 hazards; initcheck 4096 errors"
    assert rows["triton"]["first finding"].endswith("the first: Invalid read")
    assert rows["torch"]["status"] == "ok" and rows["torch"]["first finding"] == ""
    assert sec.extra == ["1 of 2 sanitized rows unsafe",
                         "not sanitized: 1 row (cpu): not run: no GPU in this cell (a CPU cell)"]


# -- what an unsafe row decides --------------------------------------------------------------------------------------

def paired_rows(unsafe: str, speedup: float = 1.3, rounds: int = 10) -> list[Result]:
    """One cell, one kernel, two workloads: torch (the baseline, with its A/A twin) and `fast`, `speedup` x faster in
    every round (a little noise), all timed in rounds; backend `unsafe`'s w2 row is unsafe, its rounds kept (the
    sanitizer runs after them)."""
    import numpy as np

    rng = np.random.default_rng(7)
    out = []
    for w in ("w1", "w2"):
        base = list(np.exp(rng.normal(0, 0.01, rounds)))
        twin = list(np.exp(rng.normal(0, 0.01, rounds)))
        fast = list(np.array(base) / speedup * np.exp(rng.normal(0, 0.01, rounds)))
        for name, series in (("torch", base), ("fast", fast)):
            bad = name == unsafe and w == "w2"
            out.append(Result(run_id="r", cell="h100.host", device="h100", toolchain="host", kernel="k", workload=w,
                              dtype="float16", backend=name, status=status.UNSAFE if bad else status.OK,
                              phase="sanitize" if bad else "done", rel_err=0.0, pairing="interleaved", rounds=rounds,
                              round_ms=series, baseline_round_ms=[] if name == "torch" else base, aa_round_ms=twin,
                              samples_ms=series, median_ms=float(np.median(series))))
    return out


def decided(results):
    from opmatrix.core.acceptance import Acceptance
    from opmatrix.decide.verdicts import decide
    from opmatrix.store import add_speedup, frame

    (v,) = decide(add_speedup(frame(results), "torch"), Acceptance("torch", 1.05))
    return v


def test_an_unsafe_contestant_is_never_adopted_however_fast():
    from opmatrix.decide.verdicts import ADOPT, KEEP

    assert decided(paired_rows(unsafe="")).verdict == ADOPT  # the same rows, all safe: fast is adopted
    v = decided(paired_rows(unsafe="fast"))
    assert v.verdict == KEEP and v.choice == "torch", v.reason
    (fast,) = v.candidates
    assert not fast.correct_everywhere and "w2 float16: unsafe" in fast.why_not


def test_an_unsafe_framework_is_a_gap_and_not_a_supported_deployment(tmp_path):
    from opmatrix.decide import verdicts as rules
    from opmatrix.decide.verdicts import GAP
    from opmatrix.store import ResultStore
    from opmatrix.upgrade.deployments import deployments

    results = paired_rows(unsafe="torch")
    v = decided(results)
    assert v.verdict == GAP and "torch is unsafe on w2 float16: compute-sanitizer found a fault" in v.reason
    folder = tmp_path / "r"
    store = ResultStore(folder)
    for r in results:
        store.append(r)
    (folder / "run.json").write_text(json.dumps({"run_id": "r", "started_at": "2026-12-07T00:00:00+00:00",
                                                 "finished_at": "2026-12-07T00:00:00+00:00"}))
    (folder / "verdicts.json").write_text(rules.to_json([v]))
    (line,) = deployments([folder], known_good=[])
    assert (line.support, line.use) == ("unsupported", "")
