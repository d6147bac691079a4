"""GPU-only faults in one cell beside healthy rows, run as a user runs them (`opmatrix run --no-ray`); skipped on a
host without a CUDA device. A CUDA illegal memory access must cost only its own row (its process's context is
lost, the next job's fresh process is fine); asking for more memory than the device has must be an `oom` row.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from opmatrix import paths
from tests.faults.gpu import faults
from tests.faults.harness import key, opmatrix, rows, unique_run_id


def cuda_device() -> str:
    """'' when a CUDA device is usable here, else why not (torch is imported only where a driver exists)."""
    if not Path("/dev/nvidiactl").exists() and not shutil.which("nvidia-smi"):
        return "no NVIDIA driver on this host"
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    return "" if torch.cuda.is_available() else f"torch {torch.__version__} sees no CUDA device"


WHY_NOT = cuda_device()
pytestmark = pytest.mark.skipif(bool(WHY_NOT), reason=WHY_NOT or "a CUDA device is here")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpu-faults")
    matrix = faults.write(root)
    run_id = unique_run_id("gpu")
    out = opmatrix("run", matrix, "--no-ray", "--run-id", run_id, "--reports", root / "reports", timeout=900)
    yield out, {r["backend"]: r for r in rows(root / "reports" / run_id)}, rows(root / "reports" / run_id)
    shutil.rmtree(paths.SCRATCH / run_id, ignore_errors=True)


def test_every_job_has_exactly_one_row(run):
    out, _, stored = run
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    assert sorted(r["backend"] for r in stored) == sorted(faults.IMPLS)
    assert len({key(r) for r in stored}) == len(stored)


def test_illegal_memory_access_is_a_runtime_error_of_its_own_row(run, observe):
    r = run[1]["oob"]
    observe("CUDA illegal memory access (Triton)", "runtime_error/first_call", f"{r['status']}/{r['phase']}")
    assert (r["status"], r["phase"]) == ("runtime_error", "first_call"), r["error"]
    assert "illegal memory access" in r["error"]
    assert r["median_ms"] is None


def test_device_out_of_memory_is_an_oom_row(run, observe):
    r = run[1]["oom"]
    observe("device out of memory", "oom/first_call", f"{r['status']}/{r['phase']}")
    assert (r["status"], r["phase"]) == ("oom", "first_call"), r["error"]
    assert "out of memory" in r["error"].lower()


def test_healthy_rows_on_the_same_gpu_are_intact(run):
    by_backend = run[1]
    for name in ("torch", "good"):  # `good` ran after both faults, in a fresh process on the same GPU
        r = by_backend[name]
        assert (r["status"], r["phase"]) == ("ok", "done"), r["error"]
        assert r["rel_err"] == 0.0 and r["median_ms"] > 0 and r["rounds"] >= 10
        assert r["timer"].startswith("cuda-events")
    assert by_backend["good"]["baseline_round_ms"] == by_backend["torch"]["round_ms"]
