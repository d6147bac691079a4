"""Unit checks of the trust rules: the physics guard (opmatrix.core.metrics), the working-set copy ceiling, and the
judge's checks (opmatrix.incell.integrity) on real CPU tensors and real processes' CPU clocks. The whole-run
behaviour against cheating contestants is tests/adversarial."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import torch

from opmatrix.core import metrics, status
from opmatrix.core.result import Result
from opmatrix.incell import integrity
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


def test_the_helpers_name_written_inputs_and_an_uninformative_reference():
    a = torch.randn(4, 4)
    kept = (a.clone(), 3)
    assert integrity.changed_inputs((a, 3), kept) == ""
    a[0, 0] += 1
    assert integrity.changed_inputs((a, 3), kept) == "input 0 (4, 4): 1 of 16 elements changed"
    with pytest.raises(PluginError, match="all zero"):
        integrity.require_informative(torch.zeros(3, dtype=torch.float64), "spec.py")
    with pytest.raises(PluginError, match="non-finite"):
        integrity.require_informative(torch.tensor([1.0, float("nan")]), "spec.py")
    with pytest.raises(PluginError, match="returns a tensor"):
        integrity.require_informative([1.0], "spec.py")
    integrity.require_informative(torch.tensor([0.0, 1.0]), "spec.py")


def test_a_reference_may_be_non_finite_only_for_a_kind_of_inputs_declared_so():
    special = torch.tensor([1.0, float("inf"), float("nan")])
    with pytest.raises(PluginError, match="inputs of kind 'outliers'; .* declared in NONFINITE_KINDS"):
        integrity.require_informative(special, "spec.py", "outliers")
    assert integrity.require_informative(special, "spec.py", "specials", nonfinite=True) is False
    assert integrity.require_informative(torch.tensor([1.0, 2.0]), "spec.py", "specials", nonfinite=True) is True
    with pytest.raises(PluginError, match="all zero where finite"):  # the NaN poison alone would pass it
        integrity.require_informative(torch.tensor([0.0, float("nan")]), "spec.py", "specials", nonfinite=True)
    with pytest.raises(PluginError, match=r"reaches 70000 .* \(65504\)"):
        integrity.require_informative(torch.tensor([1.0, -7e4]), "spec.py", largest=65504.0)


def test_marks_are_judged_on_the_judges_own_window_of_the_shared_clock():
    window = (100.0, 100.010)
    assert integrity.clock_fault([100.001, 100.002, 100.003, 100.004], 2, window, True) == ""
    assert "outside the judge's own window" in integrity.clock_fault([60.0, 60.001, 60.002, 60.003], 2, window, True)
    assert "outside" in integrity.clock_fault([100.001, 100.002, 100.003, 100.02], 2, window, True)
    assert "backwards" in integrity.clock_fault([100.004, 100.002, 100.003, 100.005], 2, window, True)
    assert "4 expected" in integrity.clock_fault([100.001, 100.002], 2, window, True)
    assert integrity.clock_fault([100.001, 100.009], 5, window, False) == ""  # a GPU burst: its start and its end
    assert "no clock marks" in integrity.clock_fault("forged", 1, window, False)


def test_a_burst_where_most_calls_take_no_time_is_uneven_and_a_lost_time_slice_is_not():
    assert integrity.uneven([8.0, 0.01, 0.01, 0.01, 8.0, 0.01, 0.01, 0.01])  # two calls do the work of eight
    assert not integrity.uneven([1.0, 1.1, 0.9, 1.0, 25.0, 1.0, 1.0, 1.0])  # one call lost a 24 ms time slice
    assert not integrity.uneven([1.0, 0.01])  # too few calls to say


def test_a_worker_busy_between_its_bursts_or_uneven_in_most_of_them_is_suspect():
    quiet = integrity.Accounts(threads=1, device_is_cpu=True)
    busy = integrity.Accounts(threads=1, device_is_cpu=True)
    for accounts, idle in ((quiet, 0.0005), (busy, 0.05)):  # CPU used while waiting between two bursts
        cpu = 0.0
        for n in range(10):
            cpu += idle
            accounts.before(cpu, n * 1.0)
            cpu += 0.1  # its burst
            accounts.after(cpu, n * 1.0 + 0.1)
    assert quiet.verdict() is None
    status_, why = busy.verdict()
    assert status_ == "suspect" and "while it was not being timed" in why
    batcher = integrity.Accounts(threads=1, device_is_cpu=True)
    for _ in range(4):
        assert batcher.burst([4.0, 0.01, 0.01, 0.01], [0.0, 0.004, 0.004, 0.004, 0.004, 0.004, 0.004, 0.00403],
                             (0.0, 0.005), 0.004, 0.0) == ""
    assert "batch-and-skip" in batcher.verdict()[1]


def test_more_cores_than_pinned_during_a_burst_is_named():
    accounts = integrity.Accounts(threads=1, device_is_cpu=True)
    marks = [0.0, 0.010, 0.010, 0.020]
    assert accounts.burst([10.0, 10.0], marks, (0.0, 0.021), 0.021, 0.0) == ""
    assert "2.00 cores" in accounts.burst([10.0, 10.0], marks, (0.0, 0.021), 0.042, 0.0)
    assert integrity.Accounts(threads=2, device_is_cpu=True).burst([10.0, 10.0], marks, (0.0, 0.021), 0.042,
                                                                   0.0) == ""


def test_two_threads_on_a_busy_machine_are_named_by_their_busiest_threads_time():
    """A CI run on a loaded 2-core machine: a contestant taking a second thread got under a core in all (0.9 of the
    burst's wall), which the wall-time rule let pass as one thread; against the 0.45 of the burst its busiest thread
    ran, it is two cores. One thread that waited for a core as long stays one."""
    marks = [0.0, 0.010, 0.010, 0.020]
    two = integrity.Accounts(threads=1, device_is_cpu=True)
    assert two.burst([10.0, 10.0], marks, (0.0, 0.020), 0.018, 0.0) == ""  # no per-thread account: the wall rule
    assert "2.00 cores" in two.burst([10.0, 10.0], marks, (0.0, 0.020), 0.018, 0.0, busiest_s=0.009)
    one = integrity.Accounts(threads=1, device_is_cpu=True)
    assert one.burst([10.0, 10.0], marks, (0.0, 0.020), 0.0095, 0.0, busiest_s=0.009) == ""


def test_thread_clocks_of_another_process_show_its_busiest_thread():
    """Real thread clocks (/proc/<pid>/task/<tid>/schedstat) of a child burning two threads: the busiest thread ran
    less than the process's CPU in all, about half of it; its main thread's wait for a core is read from the same
    account."""
    code = ("import threading, time\n"
            "def burn():\n    end = time.monotonic() + 3\n    while time.monotonic() < end: pass\n"
            "t = threading.Thread(target=burn); t.start(); burn(); t.join()\n")
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.5)
        before, cpu_before = integrity.thread_schedstat(child.pid), integrity.process_cpu_s(child.pid)
        time.sleep(1.0)
        after, cpu_after = integrity.thread_schedstat(child.pid), integrity.process_cpu_s(child.pid)
    finally:
        child.kill()
        child.wait()
    busiest = integrity.busiest_thread_s(before, after)
    assert len(after) >= 2 and busiest is not None
    assert integrity.main_thread_waited_s(before, after, child.pid) >= 0
    assert integrity.main_thread_waited_s(before, {}, child.pid) is None
    assert busiest < 0.75 * (cpu_after - cpu_before), (busiest, cpu_after - cpu_before)


def test_every_row_is_checked_enough_to_see_a_tenth_of_wrong_calls():
    """44 checks give a 99 % chance of seeing wrong outputs on a random tenth of the calls: the least every row
    gets however cheap its calls are against their references."""
    assert integrity.checks_for() == 44
    assert 1 - 0.9 ** integrity.checks_for() >= integrity.CATCH_WANTED > 1 - 0.9 ** (integrity.checks_for() - 1)


def test_marks_that_leave_most_of_each_burst_between_calls_are_suspect():
    accounts = integrity.Accounts(threads=1, device_is_cpu=True)
    for _ in range(3):  # calls reported as 6 ms of each 10 ms: 40 % of each burst unaccounted
        accounts.burst([3.0, 3.0], [0.0, 0.003, 0.005, 0.008], (0.0, 0.009), 0.008, 0.0)
    assert "between its calls" in accounts.verdict()[1]


def test_the_judge_reads_another_processs_cpu_time_as_the_kernel_accounts_it():
    spinner = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 30: pass"])
    try:
        time.sleep(0.3)
        first = integrity.process_cpu_s(spinner.pid)
        assert first is not None
        deadline = time.monotonic() + 20  # on a loaded machine the spinner gets a core only now and then
        second = first
        while second - first <= 0.2 and time.monotonic() < deadline:
            time.sleep(0.1)
            second = integrity.process_cpu_s(spinner.pid)
        assert second - first > 0.2  # it burned CPU while this process slept
    finally:
        spinner.kill()
        spinner.wait()
    assert integrity.process_cpu_s(spinner.pid) is None  # gone
    assert integrity.process_cpu_s(os.getpid()) > 0


def test_gpu_work_outside_the_calls_events_is_suspect_and_the_flush_and_launches_are_not():
    honest, hidden = (integrity.Accounts(threads=1, device_is_cpu=False, flush_ms=0.06) for _ in range(2))
    for _ in range(3):  # 8 calls a burst: honest ones 2 ms of events each, 2.08 ms a call in all
        assert honest.burst([2.0] * 8, [0.0, 0.0166], (0.0, 0.0166), None, 0.0) == ""
        # the same bursts' time, but the events see 0.01 ms a call: the work ran elsewhere
        assert hidden.burst([0.01] * 8, [0.0, 0.0166], (0.0, 0.0166), None, 0.0) == ""
    assert honest.verdict() is None
    assert "outside the timed events" in hidden.verdict()[1]


def test_a_bursts_own_cost_shared_by_the_group_is_not_hidden_work_and_work_beyond_it_is():
    """An H100, rmsnorm over 128 MB: the group's memory held 7 calls a burst, every worker's burst took 1.9 ms beyond
    its events and flushes (0.27 ms a call against 0.15 ms events). That fixed cost is every worker's, the least of
    them the judge's measure of it; a worker whose device work runs outside its events shows it on top."""
    honest, hidden = (integrity.Accounts(threads=1, device_is_cpu=False, flush_ms=0.085) for _ in range(2))
    for _ in range(5):
        window = (0.0, (7 * (0.15 + 0.085) + 1.9) / 1e3)
        assert honest.burst([0.15] * 7, [0.0, window[1]], window, None, 0.0) == ""
        assert hidden.burst([0.02] * 7, [0.0, window[1]], window, None, 0.0) == ""  # 0.13 ms a call elsewhere
    overhead = min(honest.burst_overhead_ms(), hidden.burst_overhead_ms())
    assert honest.burst_overhead_ms() == pytest.approx(1.9)
    assert "outside the timed events" in honest.verdict()[1]  # without the group's measure: flagged, as on the H100
    assert honest.verdict(overhead) is None
    assert "outside the timed events" in hidden.verdict(overhead)[1]


@pytest.mark.parametrize("device_is_cpu, share, caught", [(True, 0.15, True), (False, 0.15, False),
                                                           (False, 0.8, True)])
def test_cpu_between_bursts_on_a_gpu_counts_only_when_it_holds_a_good_share_of_a_core(device_is_cpu, share, caught):
    """torch.compile's compile pool used 0.1-0.17 of a core between its bursts on an H100 host: nothing taken from
    the GPU's contestants. On a CPU the same is taken from the contestants timed meanwhile."""
    accounts = integrity.Accounts(threads=1, device_is_cpu=device_is_cpu)
    cpu = 0.0
    for n in range(10):
        cpu += share * 1.0  # a 1 s wait between two bursts
        accounts.before(cpu, n * 1.1 + 1.0)
        cpu += 0.1
        accounts.after(cpu, n * 1.1 + 1.1)
    found = accounts.verdict()
    assert (found is not None and "while it was not being timed" in found[1]) == caught


def test_a_call_alone_is_judged_against_a_control_call_of_the_same_bursts():
    """On a loaded 2-core machine an honest torch.compile call (~0.1 ms) strays 2-4x in about half the bursts, on
    any contents: its call alone does, and so does a call chosen at random on shared contents. An answer-sharer is
    slow alone and fast on shared contents."""
    honest, sharer = (integrity.Accounts(threads=1, device_is_cpu=True) for _ in range(2))
    for n in range(12):
        honest.alone(0.4 if n % 2 else 0.1, [0.1] * 6, 0.1 if n % 2 else 0.4)
        sharer.alone(0.4, [0.1] * 6, 0.1)  # its alone call does the work; shared ones read another's answers
    assert honest.verdict() is None
    assert "faster on contents another process has seen" in sharer.verdict()[1]
