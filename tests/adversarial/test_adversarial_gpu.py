"""The adversarial suite on a CUDA device: every CPU trap, plus a contestant that launches its work on a side
stream, in one GPU cell beside the honest baseline (`opmatrix run --no-ray`). Skipped on a host without a CUDA
device: the GPU issue runs it on a lent H200."""
from __future__ import annotations

import pytest

from tests.adversarial import adversaries


def _no_cuda() -> str:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    return "" if torch.cuda.is_available() else f"torch {torch.__version__} sees no CUDA device"


WHY_NOT = _no_cuda()
pytestmark = [pytest.mark.integration, pytest.mark.skipif(bool(WHY_NOT), reason=WHY_NOT or "a CUDA device")]
# a GPU call's host threads do not change its device time: a second CPU thread is not a gain there
GPU_ADVERSARIES = {**adversaries.ADVERSARIES, "patched-events": adversaries.PATCHED_EVENTS,
                   "side-stream": adversaries.SIDE_STREAM,
                   "more-threads-unseen": (adversaries.ADVERSARIES["more-threads-unseen"][0], {"suspect", "ok"}),
                   # its thread's kernels land on the default stream the next call's events also time (H100: no gain)
                   "thread-later": (adversaries.ADVERSARIES["thread-later"][0], {"mismatch", "suspect", "ok"})}

MATRIX = """
name = "adversarial-gpu"
backends = {backends}
[run]
timeout_s = 180
warmup_ms = 0
rep_ms = 20
rounds = 10
max_rounds = 10
burst_ms = 20
burst_warmup_ms = 2
cuda_graph_below_ms = 0
compile_only = false
kernels_dir = "kernels"
backends_dir = "backends"
[[device]]
id = "gpu"
vendor = "nvidia"
arch = "auto"
[[toolchain]]
name = "host"
system = true
[[kernel]]
name = "gemm_relu"
workloads = {{ nvidia = ["square_4096"] }}
dtypes = {{ nvidia = ["float32"] }}
"""


@pytest.fixture(scope="module")
def run():
    with adversaries.matrix_run(MATRIX, GPU_ADVERSARIES, "adversarial-gpu", timeout=900) as ran:
        yield ran


@pytest.mark.parametrize("backend", list(GPU_ADVERSARIES))
def test_every_adversary_is_caught_on_the_gpu_and_never_adopted(run, backend):
    out, by_backend, verdicts = run
    assert out.returncode in (0, 1), out.stderr[-3000:]
    row = by_backend[backend]
    print(f"\n{backend}: {row['status']} in phase {row['phase']}: {row['error'][:300]}")
    assert row["status"] in GPU_ADVERSARIES[backend][1], (row["status"], row["error"][:500])
    if row["status"] == "ok":  # its trick never fired, or gains nothing on a GPU: no faster than the honest copy
        assert row["median_ms"] >= 0.9 * by_backend["honest"]["median_ms"], row["median_ms"]
    assert all(v["choice"] != backend for v in verdicts)


def test_the_honest_rows_on_the_gpu_pass_every_check(run):
    _, by_backend, _ = run
    for backend in ("torch", "honest"):
        row = by_backend[backend]
        print(f"\n{backend}: {row['status']}, {row['rounds']} rounds, {row['input_sets']} calls on fresh contents, "
              f"{row['timed_checks']} checked (chance to see a tenth wrong: {row['catch_p10']}), judge "
              f"{row['judge_s']} s of {row['rounds_s']} s of rounds")
        assert row["status"] == "ok", row["error"][:500]
        assert row["input_sets"] >= 2 * row["rounds"] and row["timed_checks"] >= 2 * row["rounds"]
