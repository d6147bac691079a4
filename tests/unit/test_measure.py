"""Measurement helpers: the timing loop's contract, roofline placement, the clock-drop rule and telemetry around a
timing."""
import time
import types

import pytest

from opmatrix.core.jobs import DeviceInfo
from opmatrix.core.metrics import roofline_pct
from opmatrix.incell import measure, telemetry


def test_a_burst_times_each_call_on_its_own_buffers_between_two_marks_of_the_shared_clock():
    seen = []

    def kernel(x, out):
        seen.append((x, out))
        time.sleep(0.002)

    calls = [((i,), f"out{i}") for i in range(4)]
    before = time.perf_counter()
    timed = measure.Timer("cpu").time_calls(kernel, calls)
    assert seen == [(i, f"out{i}") for i in range(4)]  # each call with its own inputs and output, in order
    assert len(timed.samples_ms) == 4 and all(s >= 2.0 for s in timed.samples_ms)
    assert len(timed.marks) == 8 and before <= timed.marks[0] and timed.marks[-1] <= time.perf_counter()
    assert timed.samples_ms == [(timed.marks[2 * i + 1] - timed.marks[2 * i]) * 1e3 for i in range(4)]
    assert timed.timer.startswith("wallclock")


def test_a_returned_output_is_delivered_after_its_calls_end_mark():
    delivered = []
    timed = measure.Timer("cpu").time_calls(lambda x, out: x * 2, [((1,), None), ((2,), None)],
                                            lambda i, returned: delivered.append((i, returned, time.perf_counter())))
    assert [(i, r) for i, r, _ in delivered] == [(0, 2), (1, 4)]
    assert timed.marks[1] <= delivered[0][2] <= timed.marks[2]  # between call 0's end and call 1's start


def test_the_same_call_repeated_fills_its_budget():
    timing = measure.time_repeated(lambda: time.sleep(0.002), "cpu", warmup_ms=5, rep_ms=40)
    assert measure.MIN_REPS <= len(timing.samples_ms) < 40
    assert all(s >= 2.0 for s in timing.samples_ms)


def test_roofline_uses_the_binding_ceiling():
    ceilings = {"tflops": {"float16": 800.0}, "copy_gbps": 4000.0}
    # 2*4096^3 flop in 0.2 ms: arithmetic bound 0.172 ms -> 86%
    assert round(roofline_pct(2 * 4096 ** 3, 100e6, 0.2, "float16", ceilings)) == 86
    # 1 GB moved in 0.5 ms: memory bound 0.25 ms -> 50%
    assert round(roofline_pct(1e6, 1e9, 0.5, "float16", ceilings)) == 50
    assert roofline_pct(1e6, 1e9, 0.5, "bfloat16", ceilings) is None  # no ceiling for that dtype: no claim


def test_clock_drop_flag():
    start = {"sm_mhz": 1980, "power_w": 500.0, "temp_c": 50, "reasons": []}
    steady = {"sm_mhz": 1950, "power_w": 690.0, "temp_c": 60, "reasons": []}
    dropped = {"sm_mhz": 1700, "power_w": 700.0, "temp_c": 70, "reasons": []}
    capped = {"sm_mhz": 1980, "power_w": 700.0, "temp_c": 70, "reasons": ["SwPowerCap"]}
    assert telemetry.summarize(start, steady)["clock_dropped"] is False
    assert telemetry.summarize(start, dropped)["clock_dropped"] is True
    summary = telemetry.summarize(start, capped)
    assert summary["clock_dropped"] is True and summary["clock_events"] == "SwPowerCap"


class FakeGpu:
    """A sampler in place of NVML (no GPU here): the SM clock drops from 1980 to 1500 MHz during the block."""

    def __init__(self, fail: bool = False):
        self.samples = iter([{"sm_mhz": 1980, "power_w": 300.0, "temp_c": 40, "reasons": []},
                             {"sm_mhz": 1500, "power_w": 700.0, "temp_c": 80, "reasons": ["HwThermalSlowdown"]}])
        self.fail, self.closed = fail, False

    def sample(self):
        if self.fail:
            raise RuntimeError("NVML query refused")
        return next(self.samples)

    def close(self):
        self.closed = True


def test_telemetry_watch_yields_the_summary_fields_after_the_block():
    gpu = FakeGpu()
    with telemetry.watch("gpu", open_gpu=lambda device: gpu) as summary:
        assert summary == {}  # filled only once the block is done
    assert summary["clock_dropped"] is True and summary["sm_mhz_start"] == 1980 and summary["sm_mhz_end"] == 1500
    assert summary["clock_events"] == "HwThermalSlowdown" and gpu.closed


def test_telemetry_watch_never_fails_a_measurement():
    cpu = DeviceInfo("cpu", "cpu", "x86_64")
    with telemetry.watch(cpu) as summary:
        pass
    assert summary == {}  # no NVML: nothing claimed
    broken = FakeGpu(fail=True)
    with telemetry.watch("gpu", open_gpu=lambda device: broken) as summary:
        pass
    assert summary == {} and broken.closed
    gpu = FakeGpu()
    with pytest.raises(ValueError), telemetry.watch("gpu", open_gpu=lambda device: gpu):
        raise ValueError("the timing failed")
    assert gpu.closed  # closed even when the block raises


def test_a_slow_call_gets_a_burst_of_at_least_burst_calls_calls():
    from opmatrix.core.jobs import Settings
    from opmatrix.incell.rounds import Contestant, burst_ms

    settings = Settings(burst_ms=20, burst_calls=30)
    slow = Contestant(job=None, server=None)
    assert burst_ms(slow, settings) == 20  # first round: nothing known yet
    slow.round_ms.append(3.0)  # a 3 ms call: 20 ms would hold 6 calls
    assert burst_ms(slow, settings) == 90
    fast = Contestant(job=None, server=None, round_ms=[0.05])
    assert burst_ms(fast, settings) == 20  # 30 calls fit in burst_ms already
    assert burst_ms(slow, Settings(burst_ms=20)) == 20  # off by default


def test_the_judge_sizes_each_burst_from_the_last_one_within_its_buffers():
    from opmatrix.core.jobs import Settings
    from opmatrix.incell.judge import Judge

    def plan(estimate_ms, slots=32, **settings):
        judge = types.SimpleNamespace(settings=Settings(**settings), slots=slots)
        return Judge._plan(judge, types.SimpleNamespace(estimate_ms=estimate_ms))

    assert plan(1.0, burst_ms=20, burst_warmup_ms=5) == (25, 5)  # 20 timed calls after 5 of warm-up
    assert plan(0.01, burst_ms=20, burst_warmup_ms=5) == (32, 8)  # as many as its buffers hold: a quarter warm-up
    assert plan(30.0, burst_ms=20, burst_warmup_ms=5) == (2, 1)  # a slow call: one warm-up, one timed
    assert plan(3.0, burst_ms=20, burst_warmup_ms=0, burst_calls=10) == (10, 0)  # at least burst_calls timed
    assert plan(1.0, slots=2, burst_ms=20, burst_warmup_ms=5) == (2, 0)  # no warm-up in a burst of two


class _ScriptedServer:
    """A timing server whose bursts return the next of a fixed sequence of medians (the rounds logic alone)."""

    def __init__(self, medians):
        self.medians = iter(medians)

    def burst(self, warmup_ms, rep_ms, timeout_s):
        return {"samples_ms": [next(self.medians)], "timer": "scripted"}


def _rounds_with_noisy_twin(noise_target: float, twin_medians=(0.97, 1.03, 0.98, 1.02)) -> int:
    import itertools

    from opmatrix.core.jobs import Settings
    from opmatrix.incell.rounds import Contestant, Rounds

    settings = Settings(rounds=10, max_rounds=40, round_extra_s=60, noise_target=noise_target)
    job = types.SimpleNamespace(timeout_s=30)
    base = Contestant(job=job, server=_ScriptedServer(itertools.repeat(1.0)))
    twin = Contestant(job=job, server=_ScriptedServer(itertools.cycle(twin_medians)), is_twin=True)
    rounds = Rounds([base, twin], base, settings)
    rounds.run()
    return rounds.count


def test_extra_rounds_while_the_aa_noise_floor_is_wider_than_the_target():
    # the twin swings +-2-3 % around the baseline: its interval stays wider than +-1 %, so rounds go to the cap
    assert _rounds_with_noisy_twin(noise_target=0.01) == 40
    # +-10 % is met at once; 0 turns the rule off: the minimum number of rounds
    assert _rounds_with_noisy_twin(noise_target=0.10) == 10
    assert _rounds_with_noisy_twin(noise_target=0) == 10


def test_an_aa_interval_narrow_but_off_one_is_not_within_the_target():
    """The floor is how far the A/A interval reaches from 1, as the report states it: a twin steadily 1.3-1.7 %
    off the baseline has a narrow interval, but not a +-1 % floor, so the rounds go on to the cap."""
    assert _rounds_with_noisy_twin(noise_target=0.01, twin_medians=(0.983, 0.987, 0.985)) == 40
    assert _rounds_with_noisy_twin(noise_target=0.02, twin_medians=(0.983, 0.987, 0.985)) == 10


def test_a_cpu_matmul_ceiling_is_sized_to_its_dtypes_speed():
    """A CPU without half-precision units runs an fp16 1024^3 product in seconds, and the timer takes at least five:
    a CPU cell with fp16 jobs spent 30 s on its ceilings. The size follows the measured one-thread rate (about 2 ms
    a call, so that a busy machine leaves some calls uninterrupted), between CPU_MATMUL_MIN and 1024, and the
    ceiling says which size it used."""
    from opmatrix.incell.ceilings import CPU_MATMUL_MIN, cpu_matmul_size, measure_ceilings

    assert cpu_matmul_size(1e9) == CPU_MATMUL_MIN  # 1 GFLOP/s: emulated fp16
    assert cpu_matmul_size(10e12) == 1024  # never past the full size
    assert CPU_MATMUL_MIN < cpu_matmul_size(100e9) < 1024  # fp32 on one AVX core
    measured = measure_ceilings("cpu", ["float32"], warmup_ms=1, rep_ms=1)
    assert measured["how"].startswith("matmul float32 ") and measured["tflops"]["float32"] > 0
    assert "one thread's rates x" in measured["how"] and len(measured["copy_gbps_by_bytes"]) == 4


def test_a_noisy_twin_alone_adds_no_rounds():
    """The A/A twin is the noise floor, not a contestant: a twin swinging +-8 % (its interval straddles
    min_speedup 1.05) adds no rounds of its own; only `noise_target` asks rounds for the floor. Before, every CPU group
    with a fast baseline ran to max_rounds or round_extra_s on its twin's noise alone."""
    assert _rounds_with_noisy_twin(noise_target=0, twin_medians=(0.92, 1.08, 0.93, 1.07)) == 10


def _settle_rounds(settle: bool, far_builds=(), noise_target: float = 0.0, close=(0.90, 1.0), far_medians=None):
    """The baseline (1.0 a round), its twin, `far` (2.0: 2x slower, decided from the first rounds on) with further
    builds of the given medians, and `close` (its ratio swings between 1.0 and 1.11: straddles 1.05 forever)."""
    import itertools

    from opmatrix.core.jobs import Settings
    from opmatrix.incell.rounds import Contestant, Rounds

    settings = Settings(rounds=10, max_rounds=30, round_extra_s=60, noise_target=noise_target)
    job = types.SimpleNamespace(timeout_s=30)
    base = Contestant(job=job, server=_ScriptedServer(itertools.repeat(1.0)))
    twin = Contestant(job=job, server=_ScriptedServer(itertools.cycle((0.97, 1.03))), is_twin=True)
    far = Contestant(job=job, server=_ScriptedServer(far_medians or itertools.repeat(2.0)))
    far.builds = [Contestant(job=job, server=_ScriptedServer(itertools.cycle(b)), is_extra_build=True)
                  for b in far_builds]
    near = Contestant(job=job, server=_ScriptedServer(itertools.cycle(close)))
    everyone = [base, twin, far, *far.builds, near]
    rounds = Rounds(everyone, base, settings, settle=settle)
    rounds.run()
    return rounds, base, twin, far, near


def test_with_settle_a_decided_contestant_leaves_the_extra_rounds_for_good():
    rounds, base, twin, far, near = _settle_rounds(settle=True)
    assert rounds.count == len(base.round_ms) == len(twin.round_ms) == len(near.round_ms) == 30  # near: undecided
    assert far.rounds_taken == list(range(10)) and far.settled_after == 10  # the group's first rounds, in order
    assert far.notes == ["timed in 10 rounds: its interval then cleared the threshold and the extra rounds went on "
                         "without it"]
    assert near.settled_after == base.settled_after == twin.settled_after == 0 and not near.notes
    assert far.rounds_s <= base.rounds_s == near.rounds_s
    assert max(p for c in (base, twin, near) for p in c.positions[10:]) == 2  # three in each extra round
    # without settle (a toolchain pair, or before): far is timed in every round
    rounds, base, twin, far, near = _settle_rounds(settle=False)
    assert len(far.round_ms) == len(near.round_ms) == rounds.count == 30 and not far.settled_after and not far.notes


def test_with_settle_a_contestant_stays_while_one_of_its_builds_is_undecided():
    """Builds leave together: far's second build straddles the threshold, so far and both builds stay."""
    rounds, base, twin, far, near = _settle_rounds(settle=True, far_builds=[(2.0,), (0.90, 1.0)])
    assert [len(c.round_ms) for c in (far, *far.builds)] == [30, 30, 30] and not far.notes
    rounds, base, twin, far, near = _settle_rounds(settle=True, far_builds=[(2.0,), (1.9, 2.1)])
    assert [c.settled_after for c in (far, *far.builds)] == [10, 10, 10]
    assert [len(c.notes) for c in (far, *far.builds)] == [1, 0, 0]  # one note, in the row the builds are stored in


def test_with_settle_the_builds_of_a_contestant_that_died_leave_with_it():
    """far's first build crashes in round 5 (its row is that crash); its second build, undecided, is not timed on
    in the extra rounds for a row that has failed."""
    from opmatrix.core.result import Result
    from opmatrix.incell.servers import ServerGone

    def dies_after(n):
        for _ in range(n):
            yield 2.0
        raise ServerGone(Result(status="crashed", error="SIGKILL"))

    rounds, base, twin, far, near = _settle_rounds(settle=True, far_builds=[(0.90, 1.0)])
    assert len(far.builds[0].round_ms) == 30  # alive and undecided: it stays
    far_died = _settle_rounds(settle=True, far_builds=[(0.90, 1.0)], far_medians=dies_after(5))
    rounds, base, twin, far, near = far_died
    assert not far.alive and len(far.round_ms) == 5
    assert len(far.builds[0].round_ms) == 10 and far.builds[0].settled_after == 10 and not far.notes
    assert len(near.round_ms) == rounds.count == 30


def test_with_settle_the_aa_noise_target_keeps_only_the_baseline_and_its_twin_going():
    """Every contestant decided, the A/A interval wider than the target: the extra rounds time the two alone."""
    rounds, base, twin, far, near = _settle_rounds(settle=True, noise_target=0.01, close=(0.5,))
    assert rounds.count == len(base.round_ms) == len(twin.round_ms) == 30
    assert len(far.round_ms) == len(near.round_ms) == 10 and far.notes and near.notes


def test_with_settle_no_contestant_is_said_to_have_left_when_no_extra_round_followed():
    rounds, base, twin, far, near = _settle_rounds(settle=True, close=(0.5,))  # all decided after 10 rounds
    assert rounds.count == len(far.round_ms) == len(near.round_ms) == 10
    assert not far.notes and not near.notes
