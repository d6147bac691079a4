"""A timed job's row from what its rounds measured: every sample (at most SAMPLES_KEPT of them), each round's time
aligned with the baseline's, the A/A twin's, its further builds' and its toolchain peer's in the same rounds,
telemetry, and what the judge observed of it (calls, checks, its own time). Stdlib only."""
from __future__ import annotations

import dataclasses
import statistics

from opmatrix.core.result import Result
from opmatrix.incell import telemetry
from opmatrix.incell.rounds import Contestant, aligned

# A row keeps at most this many timing samples (a fast kernel's rounds reach 100,000 calls, 0.8 MB of JSON): every
# k-th in time order, the first and the last included (kept_samples). Its median and p10/p90 are computed from all
# of them before, and `reps` is how many there were.
SAMPLES_KEPT = 4096


def timed(result: Result, c: Contestant, base: Contestant | None, twin: Contestant | None,
          peer: Contestant | None = None, peer_toolchain: str = "") -> Result:
    """The row with what the rounds measured: every sample, each round's time aligned with the baseline's and the
    A/A twin's times of the same rounds (and, for a candidate toolchain's row, its peer's under the baseline
    toolchain), and telemetry over the rounds."""
    samples = c.samples_ms
    cuts = statistics.quantiles(samples, n=10, method="inclusive") if len(samples) > 1 else samples * 9
    half = c.round_ms[len(c.round_ms) // 2:]
    extra = telemetry.summarize(c.states[0], c.states[-1]) if c.states else {}
    return dataclasses.replace(
        result, **extra, pairing="interleaved" if c.block <= 1 else f"interleaved, block {c.block} (device memory)",
        rounds=len(c.round_ms), rounds_s=round(c.rounds_s, 3), round_group=c.round_group, timer=c.timer,
        samples_ms=samples, reps=len(samples),
        median_ms=statistics.median(samples), p10_ms=cuts[0], p90_ms=cuts[-1],
        rerun_median_ms=statistics.median(half) if half else None, round_ms=c.round_ms,
        baseline_round_ms=aligned(base, c) if base is not None and base is not c else [],
        aa_round_ms=aligned(twin, c), build_round_ms=[ms for b in c.builds for ms in aligned(b, c)],
        timing_notes="; ".join(filter(None, [result.timing_notes, *builds_missing(c)])), round_position=c.positions,
        peer_toolchain=peer_toolchain if peer is not None else "", peer_round_ms=aligned(peer, c),
        round_sm_mhz=[s["sm_mhz"] for s in c.states if s.get("sm_mhz") is not None],
        round_clock_events=[",".join(s.get("reasons", [])) for s in c.states],
        round_others_cores=c.round_others if None not in c.round_others else [])


def judged(result: Result, c: Contestant) -> Result:
    """The row with what the judge observed of the contestant: how many calls it ran (each on contents of its own),
    how many of them the judge checked, the chance its checks had of seeing wrong outputs on a tenth of them, the
    judge's own seconds for it, and (CPU) the share of its timed calls' time it waited for a core."""
    seat = c.seat
    if seat is None:
        return result
    waited = 100.0 * seat.waited_ms / seat.timed_ms if seat.timed_ms > 0 else None
    return dataclasses.replace(result, input_sets=seat.calls, timed_checks=seat.checked,
                               idle_cpu_s=round(seat.accounts.idle_cpu_s, 4),
                               catch_p10=round(seat.catch_chance(), 6), judge_s=round(seat.judge_s, 4),
                               waited_pct=None if waited is None else round(waited, 3))


def builds_missing(c: Contestant) -> list[str]:
    """Why a further build of `c` is not in its row's build_round_ms: it did not fit beside the others, or it
    stopped before the rounds ended."""
    out = list(c.notes)
    for n, b in enumerate(c.builds, start=2):
        if not aligned(b, c):
            why = b.failure.row.error if b.failure is not None else "missed a round"
            out.append(f"build {n} left out of the intervals: {why[:200]}")
    return out


def kept_samples(samples: list[float], most: int = SAMPLES_KEPT) -> list[float]:
    """At most `most` of a row's samples, evenly spaced in time order (the first and the last always kept)."""
    if len(samples) <= most:
        return list(samples)
    step = (len(samples) - 1) / (most - 1)
    return [samples[round(i * step)] for i in range(most)]
