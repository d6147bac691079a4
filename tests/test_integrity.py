"""Unit checks of the trust rules: the physics guard (opmatrix.core.metrics), the working-set copy ceiling, and
the integrity helpers (opmatrix.incell.integrity) on real CPU tensors. The whole-run behaviour against cheating
contestants is tests/adversarial."""
from __future__ import annotations

import time

import pytest
import torch

from opmatrix.core import metrics, status
from opmatrix.core.result import Result
from opmatrix.incell import correctness, integrity
from opmatrix.incell.contract import PluginError

CPU_CEILINGS = {"tflops": {"float32": 0.1}, "copy_gbps": 10.0,
                "copy_gbps_by_bytes": {str(2 ** 18): 100.0, str(2 ** 24): 40.0, str(2 ** 27): 10.0}}


def row(median_ms: float, flops: float, min_bytes: float, vendor: str = "cpu") -> Result:
    return Result(status=status.OK, dtype="float32", vendor=vendor, median_ms=median_ms, flops=flops,
                  min_bytes=min_bytes)


def test_the_copy_ceiling_of_a_row_is_the_rate_of_the_largest_measured_size_not_above_its_bytes():
    assert metrics.copy_gbps(CPU_CEILINGS, 2 ** 20) == 100.0  # between 256 KiB and 16 MiB: the faster level bounds it
    assert metrics.copy_gbps(CPU_CEILINGS, 2 ** 25) == 40.0
    assert metrics.copy_gbps(CPU_CEILINGS, 2 ** 30) == 10.0
    assert metrics.copy_gbps(CPU_CEILINGS, 1000) == 100.0  # below every size: the smallest's
    assert metrics.copy_gbps({"copy_gbps": 3000.0}, 2 ** 20) == 3000.0  # a GPU: one large copy


def test_a_rate_beyond_the_roofline_by_more_than_the_margin_is_suspect_and_says_why():
    # 1 GFLOP in 1 ms is 1 TFLOP/s, 10x a 0.1 TFLOP/s ceiling
    caught = metrics.derive(row(1.0, 1e9, 1e3), CPU_CEILINGS)
    assert caught.status == status.SUSPECT and caught.phase == "timing"
    assert "1000 % of the roofline bound" in caught.error
    assert "TFLOP/s against a matmul ceiling of 0.1" in caught.error
    honest = metrics.derive(row(20.0, 1e9, 1e3), CPU_CEILINGS)  # 50 % of the bound
    assert honest.status == status.OK and honest.roofline_pct == pytest.approx(50.0)


def test_the_margin_is_stated_per_vendor_and_a_failed_row_is_left_alone():
    at_180 = row(1.0 / 1.8, 1e8, 1e3)  # 180 % of the CPU bound: within the CPU's margin, beyond a GPU's
    assert metrics.derive(at_180, CPU_CEILINGS).status == status.OK
    gpu = dict(CPU_CEILINGS)
    gpu.pop("copy_gbps_by_bytes")
    assert metrics.derive(row(1.0 / 1.8, 1e8, 1e3, vendor="nvidia"), gpu).status == status.SUSPECT
    failed = Result(status=status.MISMATCH, dtype="float32", vendor="cpu", median_ms=1e-6, flops=1e9, min_bytes=1.0)
    assert metrics.derive(failed, CPU_CEILINGS).status == status.MISMATCH


def test_the_helpers_name_written_inputs_a_wrong_form_and_an_uninformative_reference():
    a = torch.randn(4, 4)
    kept = integrity.pristine((a, 3))
    assert integrity.changed_inputs((a, 3), kept) == ""
    a[0, 0] += 1
    assert integrity.changed_inputs((a, 3), kept) == "input 0 (4, 4): 1 of 16 elements changed"
    like = torch.empty(4, 4)
    assert integrity.output_form(torch.empty(4, 4), like) == ""
    assert "dtype torch.float64" in integrity.output_form(torch.empty(4, 4, dtype=torch.float64), like)
    assert "shape (4, 3)" in integrity.output_form(torch.empty(4, 3), like)
    assert "not a tensor" in integrity.output_form([1.0], like)
    with pytest.raises(PluginError, match="all zero"):
        integrity.require_informative(torch.zeros(3, dtype=torch.float64), "spec.py")
    with pytest.raises(PluginError, match="non-finite"):
        integrity.require_informative(torch.tensor([1.0, float("nan")]), "spec.py")
    integrity.require_informative(torch.tensor([0.0, 1.0]), "spec.py")


def _timed_call(kernel, returns_output=False) -> integrity.TimedCall:
    def make(seed):
        return (torch.randn(64, generator=torch.Generator().manual_seed(seed)),)

    def reference(inputs):
        return inputs[0].double() * 2

    sets, _ = integrity.make_sets(make, lambda: torch.empty(64), reference, 11, "cpu")
    return integrity.TimedCall(kernel, sets, returns_output, "cpu", lambda: correctness.Verdict(1e-6, 0, 1e-6),
                               lambda seed: (make(seed), integrity.reference_of(reference, make(seed))), 500)


def test_checked_calls_catch_a_kernel_that_skips_its_work_after_some_calls():
    calls = [0]

    def lazy(x, out):
        calls[0] += 1
        if calls[0] <= 3:
            out.copy_(x * 2)

    timed_call = _timed_call(lazy)
    for _ in range(3):
        timed_call()
    with pytest.raises(integrity.Cheat, match="was wrong") as caught:
        timed_call.after_burst([0.01] * 5)
    assert caught.value.status == status.MISMATCH


@pytest.mark.parametrize("burst_calls", [0, 1, 2, 3])
def test_a_kernel_that_returns_its_answer_for_the_last_pointer_it_saw_is_caught_whatever_the_bursts_length(
        burst_calls):
    """The cheat that escaped CI once: it recomputes only when its input's pointer differs from its last call's,
    so a checked call on the buffers of the set it did not see last was honest. A burst's call count (odd or even,
    as the machine's speed makes it) must not decide whether it is caught."""
    kept = []

    def remembers_last_pointer(x, out):
        if not kept or kept[0][0] != x.data_ptr():
            kept[:] = [(x.data_ptr(), x * 2)]
        return kept[0][1]

    timed_call = _timed_call(remembers_last_pointer, returns_output=True)
    for _ in range(burst_calls):
        timed_call()
    with pytest.raises(integrity.Cheat, match="another set's contents in its input buffers") as caught:
        timed_call.after_burst([0.01] * 5)
    assert caught.value.status == status.MISMATCH


def test_an_honest_kernel_passes_every_check_and_is_not_judged_slower_than_its_bursts():
    timed_call = _timed_call(lambda x, out: out.copy_(x * 2))
    for _ in range(4):
        timed_call.after_burst([0.01] * 5)
    timed_call.judge()
    assert timed_call.checks.passed == 4 * integrity.CHECKS_PER_BURST
    assert len(timed_call.checks.fresh_ms) == 4


def test_a_slow_call_is_warmed_once_before_a_checked_call_and_a_quick_one_three_times():
    """The warm-up before a checked call stops once it has lasted WARM_MS: a CPU kernel of half a second (TileLang's
    CPU gemm in the default matrix) is not called three extra times per check."""
    for sleep_s, warm in ((0, integrity.WARM_CALLS), (integrity.WARM_MS / 1e3, 1)):
        calls = [0]

        def kernel(x, out, sleep_s=sleep_s):
            calls[0] += 1
            time.sleep(sleep_s)
            out.copy_(x * 2)

        timed_call = _timed_call(kernel)
        timed_call.after_burst([0.01] * 5)
        assert calls[0] == integrity.CHECKS_PER_BURST * (warm + 1)


def test_checked_calls_on_fresh_contents_far_slower_than_the_bursts_are_suspect():
    timed_call = _timed_call(lambda x, out: out.copy_(x * 2))
    for _ in range(3):
        timed_call.after_burst([0.01] * 5)
    timed_call.checks.fresh_ms[:] = [5.0, 6.0, 7.0]  # as a kernel that computes only on contents it has not seen
    with pytest.raises(integrity.Cheat, match="skipped work") as caught:
        timed_call.judge()
    assert caught.value.status == status.SUSPECT
