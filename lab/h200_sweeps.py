"""What the H200 tools share: the device record their builds ask for, and the interleaved timing rounds of the
sweeps.

The sweeps (h200_*_sweep.py) are design probes run before an `opmatrix run`, whose own rounds are
opmatrix.incell.rounds. They time a contestant the way a cell times a row (triton's do_bench: L2 flushed, median of
a burst), and each round visits every contestant in a fresh shuffled order, so a power-state drift between rounds
hits them alike; per-round ratios then pair contestants (opmatrix.decide.stats.ratios).

The tools import this file from their own folder: run them from the project root (`python3 lab/NAME.py`)."""
from __future__ import annotations

import random
from collections.abc import Callable

from opmatrix.core.jobs import DeviceInfo

H200 = DeviceInfo("h200", "nvidia", "sm_90", "H200")


def burst_median_ms(fn: Callable[[], object], warmup_ms: int = 5, rep_ms: int = 20) -> float:
    """One burst of calls, L2 flushed before each, its median in ms (triton.testing.do_bench)."""
    from triton.testing import do_bench

    return do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")


def interleaved_rounds(fns: dict[str, Callable[[], object]], rounds: int,
                       time: Callable[[Callable[[], object]], float] = burst_median_ms) -> dict[str, list[float]]:
    """Each contestant's time per round, aligned by round: round r visits all of them in an order shuffled by r
    (the same order for the same r, so a rerun visits them alike)."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    for r in range(rounds):
        random.Random(r).shuffle(order)
        for name in order:
            times[name].append(time(fns[name]))
    return times
