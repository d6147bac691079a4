"""Rounds that stray from a row's own distribution (opmatrix.core.straying): found by one rule, timed again in the
cell, left out of the intervals in the driver, named in the verdict; and the machine's load from other processes
measured round by round (opmatrix.incell.machine_load)."""
import itertools
import re
import subprocess
import sys
import time
import types

import numpy as np
import pytest

from opmatrix.core import straying
from opmatrix.core.acceptance import Acceptance
from opmatrix.core.acceptance import Acceptance
from opmatrix.core.jobs import Settings
from opmatrix.core.result import Result
from opmatrix.decide import stats
from opmatrix.decide.verdicts import KEEP, decide
from opmatrix.incell.rounds import Contestant, Rounds
from opmatrix.store import add_speedup, frame


def test_a_round_far_from_its_series_strays_and_ordinary_noise_does_not():
    rng = np.random.default_rng(1)
    steady = list(np.exp(rng.normal(0, 0.05, 20)))
    assert straying.strayed(steady) == []
    hit = steady.copy()
    hit[7] = 500 * float(np.median(steady))  # the busy-machine round: 500x the median
    assert straying.strayed(hit) == [7]
    fast = steady.copy()
    fast[3] = float(np.median(steady)) / 3  # a round far faster than the rest strays too
    assert straying.strayed(fast) == [3]
    # a round 1.8x the median is under STRAY_FACTOR; a wide series (+-60 %) leaves a 2.5x round inside 5 SDs
    near = steady.copy()
    near[5] = 1.8 * float(np.median(steady))
    assert straying.strayed(near) == []
    wide = list(np.exp(rng.normal(0, 0.6, 20)))
    wide[2] = 2.5 * float(np.median(wide))
    assert 2 not in straying.strayed(wide)
    assert straying.strayed([1.0, 1.0, 1.0, 100.0]) == []  # fewer than MIN_ROUNDS: nothing can stray


def test_strays_in_any_aligned_series_leave_together_unless_they_are_the_rows_own_shape():
    base = [1.0] * 10
    own = [0.5] * 10
    own[2] = 40.0
    twin = [1.0] * 10
    twin[6] = 9.0
    found = straying.of_rounds(own, base, twin, [])
    assert found.rounds == (2, 6) and found.left_out == (2, 6) and not found.kept
    bimodal = [0.5, 0.5, 2.0, 0.5, 2.0, 0.5, 2.0, 0.5, 0.5, 0.5]  # a slow path in 3 of 10 rounds: its own behaviour
    found = straying.of_rounds(bimodal, base)
    assert found.rounds == (2, 4, 6) and found.kept and found.left_out == ()
    note = straying.describe(found, {"this row": bimodal, "the baseline": base})
    assert "3 of 10 rounds strayed" in note and "kept in the interval" in note


def _scripted(medians):
    class Server:
        def __init__(self):
            self.medians = iter(medians)

        def burst(self, warmup_ms, rep_ms, timeout_s):
            return {"samples_ms": [next(self.medians)], "timer": "scripted"}
    return Server()


def test_the_cell_times_one_more_round_for_each_that_strayed():
    settings = Settings(rounds=10, max_rounds=20, round_extra_s=60)
    job = types.SimpleNamespace(timeout_s=30)
    base = Contestant(job=job, server=_scripted(itertools.repeat(1.0)))
    twin = Contestant(job=job, server=_scripted(itertools.cycle((0.99, 1.01))), is_twin=True)
    hit = Contestant(job=job, server=_scripted(itertools.chain([0.5] * 3, [250.0], [0.5, 0.5], [90.0],
                                                               itertools.repeat(0.5))))
    rounds = Rounds([base, twin, hit], base, settings)
    rounds.run()
    assert rounds.count == 12 and len(hit.round_ms) == 12
    # the load of other processes is recorded for every round each contestant took part in (Linux: /proc/stat)
    assert len(hit.round_others) == 12


def _group(own_rounds, base_rounds, twin_rounds, backend="slow", workload="w1"):
    common = dict(run_id="r", cell="cpu.host", device="cpu", toolchain="host", kernel="k", workload=workload,
                  dtype="float32", status="ok", rel_err=0.0, pairing="interleaved", rounds=len(base_rounds))
    return [Result(**common, backend="torch", round_ms=list(base_rounds), baseline_round_ms=[],
                   aa_round_ms=list(twin_rounds), samples_ms=list(base_rounds),
                   median_ms=float(np.median(base_rounds))),
            Result(**common, backend=backend, round_ms=list(own_rounds), baseline_round_ms=list(base_rounds),
                   aa_round_ms=list(twin_rounds), samples_ms=list(own_rounds),
                   median_ms=float(np.median(own_rounds)))]


def test_a_strayed_round_is_left_out_of_the_interval_and_named():
    rng = np.random.default_rng(4)
    base = np.exp(rng.normal(0, 0.03, 12))
    twin = base * np.exp(rng.normal(0, 0.02, 12))
    own = base / 0.7 * np.exp(rng.normal(0, 0.02, 12))  # 0.7x: slower on every round
    hit = own.copy()
    hit[5] = 500 * float(np.median(own))  # the torch.compile round: ~23 ms against a 0.046 ms median
    df = stats.add_paired_columns(add_speedup(frame(_group(hit, base, twin)), "torch"))
    clean = stats.add_paired_columns(add_speedup(frame(_group(np.delete(own, 5), np.delete(base, 5),
                                                              np.delete(twin, 5))), "torch"))
    row, expected = df[df.backend == "slow"].iloc[0], clean[clean.backend == "slow"].iloc[0]
    assert (row.speedup, row.speedup_lo, row.speedup_hi) == pytest.approx(
        (expected.speedup, expected.speedup_lo, expected.speedup_hi))
    assert row.strayed_rounds == 1
    assert "1 of 12 rounds strayed (round 6" in row.stray_note and "this row" in row.stray_note
    factor = float(re.search(r"([0-9.]+)x\)", row.stray_note).group(1))
    assert 450 < factor < 550 and "left out of the intervals" in row.stray_note


def test_the_verdict_names_the_strayed_rounds_and_says_a_busy_machine_is_not_to_be_trusted():
    rng = np.random.default_rng(9)
    results = []
    for w in ("w1", "w2"):
        base = np.exp(rng.normal(0, 0.03, 12))
        twin = base * np.exp(rng.normal(0, 0.02, 12))
        own = base / 0.5 * np.exp(rng.normal(0, 0.02, 12))
        own[3] = 400 * float(np.median(own))
        results += _group(own, base, twin, workload=w)
    (v,) = decide(add_speedup(frame(results), "torch"), Acceptance("torch", 1.05))
    assert v.verdict == KEEP and "rounds that strayed were left out of the intervals (2 over 2 row(s))" in v.reason
    assert "not to be trusted" not in v.reason  # left out and timed again: said, not doubted
    for r in results:
        r.round_others_cores = [1.4] * 12  # other processes held 1.4 cores in every round
    (v,) = decide(add_speedup(frame(results), "torch"), Acceptance("torch", 1.05))
    assert "not to be trusted as it stands: a busy machine: other processes kept 1.4 cores busy" in v.reason


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/stat")
def test_another_process_burning_a_core_is_measured_and_the_cells_own_work_is_not():
    from opmatrix.incell.machine_load import OthersMeter

    meter = OthersMeter()
    # a process outside this one's tree: its parent shell exits at once, so it is reparented away from us
    subprocess.run(["sh", "-c", f"{sys.executable} -c 'import time\nt=time.time()\nwhile time.time()-t<1.5: pass' &"],
                   check=True)
    time.sleep(0.1)
    meter.start()
    time.sleep(1.0)
    others = meter.stop()
    assert others is not None and others > 0.4, others
    meter.start()
    t = time.time()
    while time.time() - t < 1.0:  # this process's own work: not another's
        pass
    own = meter.stop()
    assert own is not None and own < others, (own, others)


def test_by_default_only_a_contestant_whose_builds_vary_is_built_twice():
    from opmatrix.core.jobs import VARYING_BUILDS

    assert Settings().builds_of(True) == VARYING_BUILDS == 2 and Settings().builds_of(False) == 1
    assert Settings(builds=3).builds_of(False) == Settings(builds=3).builds_of(True) == 3  # the matrix's word


def test_an_autotuned_build_counts_as_one_that_varies():
    from opmatrix.incell.entry import autotuned

    assert autotuned('{"block": 64, "tuning": {"seconds": [1.2], "stable": true}}')
    assert not autotuned('{"block": 64}') and not autotuned("") and not autotuned("not json")


def test_a_throttled_gpu_puts_the_verdict_in_doubt_and_a_power_cap_does_not():
    from opmatrix.decide import trust

    results = []
    rng = np.random.default_rng(2)
    for w in ("w1", "w2"):
        base = np.exp(rng.normal(0, 0.01, 12))
        results += _group(base / 1.3, base, base * np.exp(rng.normal(0, 0.01, 12)), backend="fast", workload=w)
    for events, doubted in (("SwPowerCap", False), ("HwThermalSlowdown,SwPowerCap", True)):
        for r in results:
            r.round_clock_events = [events] * 12
        (v,) = decide(add_speedup(frame(results), "torch"), Acceptance("torch", 1.05))
        assert ("not to be trusted as it stands: the GPU was slowed by heat" in v.reason) == doubted, v.reason
    assert trust.THROTTLED_SHARE == 0.2
