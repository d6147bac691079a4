"""Which rounds strayed: the one rule both the cell (which times a round again for each that strayed) and the driver
(which leaves them out of a row's intervals and names them) apply. Stdlib only.

A round strays from a series (one contestant's time in each round) when its time is at least STRAY_FACTOR times the
series' median, or at most its reciprocal, AND more than STRAY_SDS robust standard deviations (1.4826 x the median
absolute deviation, on the log scale) from it: a background job, a page-in, a migration to a busy core, a clock
event. A row's rounds are its own series beside the baseline's and the A/A twin's of the same rounds (and its
further builds'): a round that strays in any of them is one where the comparison was disturbed, and leaves them all.

Left out only while they are few: when more than MOST_SHARE of a row's rounds stray, the slow (or fast) rounds are
the contestant's own behaviour, not interference (a kernel that takes a slow path now and then), and every round is
kept, so the interval carries them. Fewer than MIN_ROUNDS rounds: nothing can stray.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

STRAY_FACTOR = 2.0
STRAY_SDS = 5.0
MIN_ROUNDS = 5
MOST_SHARE = 0.2
NORMAL_MAD = 1.4826  # the median absolute deviation of a normal distribution, in standard deviations


def strayed(series) -> list[int]:
    """The indices of the rounds of one series (times, > 0) that stray from it; [] with fewer than MIN_ROUNDS."""
    values = list(series)
    logs = [math.log(v) for v in values if v > 0 and math.isfinite(v)]
    if len(logs) < MIN_ROUNDS:
        return []
    centre = statistics.median(logs)
    spread = NORMAL_MAD * statistics.median(abs(x - centre) for x in logs)
    reach = math.log(STRAY_FACTOR)
    return [i for i, v in enumerate(values) if v > 0 and math.isfinite(v)
            and abs(math.log(v) - centre) >= reach and abs(math.log(v) - centre) > STRAY_SDS * spread]


@dataclass(frozen=True)
class Strays:
    rounds: tuple[int, ...] = ()  # the rounds (indices into the aligned series) that strayed in any series
    kept: bool = False  # too many to be interference (MOST_SHARE): left in
    total: int = 0  # the rounds there were

    @property
    def left_out(self) -> tuple[int, ...]:
        return () if self.kept else self.rounds


def of_rounds(*series) -> Strays:
    """The rounds that strayed in any of these aligned series (empty ones are skipped)."""
    present = [list(s) for s in series if s is not None and len(s)]
    if not present:
        return Strays()
    total = min(len(s) for s in present)
    found = sorted({i for s in present for i in strayed(s[:total])})
    return Strays(tuple(found), kept=len(found) > MOST_SHARE * total, total=total)


def describe(strays: Strays, series: dict[str, list[float]]) -> str:
    """One line naming the rounds that strayed and how far, for a row's notes ('' when none did)."""
    if not strays.rounds:
        return ""
    worst_name, worst_round, worst_factor, worst_ms, worst_median = "", 0, 1.0, 0.0, 0.0
    for name, values in series.items():
        values = list(values)[:strays.total]
        positive = [v for v in values if v > 0]
        if not positive:
            continue
        median = statistics.median(positive)
        for i in strays.rounds:
            if i < len(values) and values[i] > 0:
                factor = max(values[i] / median, median / values[i])
                if factor > worst_factor:
                    worst_name, worst_round, worst_factor, worst_ms, worst_median = name, i, factor, values[i], median
    numbers = ", ".join(str(i + 1) for i in strays.rounds)
    what = (f"{len(strays.rounds)} of {strays.total} rounds strayed (round {numbers}; worst: round {worst_round + 1}, "
            f"{worst_name} {worst_ms:.4g} ms against its median {worst_median:.4g} ms, {worst_factor:.3g}x)")
    if strays.kept:
        return (f"{what}: more than {MOST_SHARE:.0%} of the rounds, so the contestant's own behaviour, kept in the "
                "interval")
    return f"{what}: left out of the intervals"
