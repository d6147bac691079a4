"""Paired statistics of each timed row against the baseline of its own rounds.

A row timed in rounds (`pairing = "interleaved"`) carries, aligned by round, its median burst time, the baseline's
and the baseline A/A twin's. From these alone:
- speed-up = median over rounds of baseline / row, with a 95 % bootstrap interval (scipy.stats.bootstrap, percentile);
- p-value: Mann-Whitney U (scipy.stats.mannwhitneyu) of the row's per-round ratios to the baseline against the A/A
  twin's per-round ratios to the same baseline: both sides are paired, so a power-state drift between rounds
  cancels (on the raw samples it would swamp a 10 % difference); without a twin, on the raw samples. q-values by
  Benjamini-Hochberg over every paired row of the run (scipy.stats.false_discovery_control);
- the A/A noise floor: the twin's ratio to the baseline in the same rounds, its interval's half-width around 1;
- with `[run] builds` >= 2, every contestant was built that many times, each build in its own worker, all timed in
  the same rounds: the build, not the round, is then the unit a new run would draw afresh. The speed-up is the
  geometric mean of the builds' median ratios, and its interval the wider of a Student-t interval over those
  medians on the log scale (scipy.stats.ttest_1samp: it includes the variation between builds, which one build's
  rounds cannot show) and the bootstrap interval over every build's rounds pooled.
Rows without rounds (older runs, correctness-only, failures) get no interval: they are never compared.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 20261130  # fixed: the same stored rows always give the same intervals


def _scipy():
    """scipy.stats, imported when first needed: it costs a second, and `opmatrix plan`, `--help` or a refused
    matrix compute no statistics."""
    from scipy import stats

    return stats


@dataclass(frozen=True)
class Interval:
    estimate: float
    lo: float
    hi: float
    samples: int | None = None  # the per-round values it was drawn from, where one series was (median_interval)

    def text(self) -> str:
        return interval_text(self.estimate, self.lo, self.hi)

    @property
    def halfwidth(self) -> float:
        """How far the interval reaches from 1 (a noise floor reads as ±this)."""
        return max(abs(self.hi - 1.0), abs(1.0 - self.lo))


def ratio_text(value: float) -> str:
    """A speed-up as printed: two decimals, or two significant digits below 0.1 (0.0033, not 0.00)."""
    return f"{value:.2f}" if abs(value) >= 0.1 else f"{value:.2g}"


def interval_text(estimate: float, lo: float, hi: float) -> str:
    """"1.07x [1.05, 1.09]"."""
    return f"{ratio_text(estimate)}x [{ratio_text(lo)}, {ratio_text(hi)}]"


def median_interval(ratios, confidence: float = CONFIDENCE) -> Interval | None:
    """Median of per-round ratios with a bootstrap interval; None with fewer than 3 rounds."""
    values = np.asarray([r for r in ratios if r > 0 and math.isfinite(r)], dtype=float)
    if len(values) < 3:
        return None
    estimate = float(np.median(values))
    if np.ptp(values) == 0:
        return Interval(estimate, estimate, estimate, len(values))
    res = _scipy().bootstrap((values,), np.median, confidence_level=confidence, n_resamples=RESAMPLES,
                          method="percentile", random_state=np.random.default_rng(SEED))
    lo, hi = res.confidence_interval
    return Interval(estimate, float(lo), float(hi), len(values))


def geomean_interval(ratio_sets: list, confidence: float = CONFIDENCE) -> Interval | None:
    """Geometric mean over workloads of each workload's median ratio; each workload's rounds resampled on their
    own (scipy.stats.bootstrap over several samples)."""
    samples = [np.asarray(r, dtype=float) for r in ratio_sets if len(r) >= 3]
    if len(samples) != len(ratio_sets) or not samples:
        return None

    def statistic(*xs, axis=-1):
        return np.exp(np.mean([np.log(np.median(x, axis=axis)) for x in xs], axis=0))

    estimate = float(statistic(*samples))
    if all(np.ptp(s) == 0 for s in samples):
        return Interval(estimate, estimate, estimate)
    res = _scipy().bootstrap(samples, statistic, confidence_level=confidence, n_resamples=RESAMPLES,
                          method="percentile", vectorized=True, random_state=np.random.default_rng(SEED))
    lo, hi = res.confidence_interval
    return Interval(estimate, float(lo), float(hi))


def builds_interval(per_build: list[list[float]], confidence: float = CONFIDENCE) -> Interval | None:
    """An estimate over independent builds, each given by its own per-round values (ratios): the geometric mean of
    the builds' medians, with the wider of (a) the Student-t interval over those medians and (b) the bootstrap
    interval of the median over all builds' rounds pooled. One build: the bootstrap interval of its rounds, as
    before. None with fewer than 3 rounds in any build."""
    builds = [[v for v in values if v > 0 and math.isfinite(v)] for values in per_build]
    builds = [b for b in builds if b]
    if not builds or any(len(b) < 3 for b in builds):
        return None
    pooled = median_interval([v for b in builds for v in b], confidence)  # >= 3 values: never None
    if len(builds) == 1:
        return pooled
    return _widened([float(np.median(b)) for b in builds], pooled, confidence)


def _widened(per_build: list[float], pooled: Interval, confidence: float) -> Interval:
    """The geometric mean of per-build ratios; its interval the union of their Student-t interval (on the log
    scale, where ratios are symmetric and the bounds stay positive) and `pooled`."""
    logs = np.log(per_build)
    estimate = float(np.exp(np.mean(logs)))
    if np.ptp(logs) == 0:
        return Interval(estimate, min(pooled.lo, estimate), max(pooled.hi, estimate))
    t = _scipy().ttest_1samp(logs, popmean=0.0).confidence_interval(confidence)
    return Interval(estimate, min(float(np.exp(t.low)), pooled.lo), max(float(np.exp(t.high)), pooled.hi))


def geomean_builds_interval(per_build_sets: list[list[list[float]]],
                            confidence: float = CONFIDENCE) -> Interval | None:
    """geomean_interval over workloads when each workload's contestant had several builds: per_build_sets[w][b] is
    workload w's per-round ratios of build b. Build b's geometric mean over the workloads (of its median ratios) is
    one draw of the contestant's geometric mean (builds are independent and exchangeable, so pairing them across
    workloads by index is as good as any); the Student-t interval over those draws is widened to the pooled
    bootstrap interval, as in builds_interval."""
    pooled = geomean_interval([[v for b in builds for v in b] for builds in per_build_sets], confidence)
    counts = {len(builds) for builds in per_build_sets}
    if pooled is None or counts == {1} or len(counts) != 1:
        return pooled  # one build each, or builds that failed unevenly across workloads: rounds only
    draws = [float(np.exp(np.mean([np.log(np.median(builds[b])) for builds in per_build_sets])))
             for b in range(counts.pop())]
    return _widened(draws, pooled, confidence)


def build_series(round_ms, build_round_ms) -> list[list[float]]:
    """A row's round medians per build: its own, then each further build's (stored one after another, each aligned
    with round_ms)."""
    own, others = list(round_ms), list(build_round_ms)
    n = len(own)
    if not n or len(others) % n:
        return [own]
    return [own] + [others[i:i + n] for i in range(0, len(others), n)]


def build_ratios(row) -> list[list[float]]:
    """baseline / row per round, for each of the row's builds (one list when it had one build)."""
    return [ratios(series, row.baseline_round_ms) for series in build_series(row.round_ms, row.build_round_ms)]


def per_round(numerator_ms, denominator_ms) -> list[float]:
    """numerator / denominator, round by round, over the rounds where both took a positive time."""
    return [n / d for n, d in zip(numerator_ms, denominator_ms) if n > 0 and d > 0]


def ratios(round_ms, baseline_round_ms) -> list[float]:
    """baseline / row per round (> 1: the row is faster)."""
    return per_round(baseline_round_ms, round_ms)


def shared_rounds(row, other) -> tuple[list[float], list[float]]:
    """The round medians of two rows over the rounds both took part in: a contestant that left the extra rounds
    once decided took the group's first rounds, in order, so two rows share the first rounds of the shorter one.
    Empty unless they are those same rounds (the baseline's medians aligned with them agree)."""
    def baseline_of(r) -> list[float]:  # the baseline's own row carries its medians as round_ms
        return list(r.baseline_round_ms) if len(r.baseline_round_ms) else list(r.round_ms)

    n = min(len(row.round_ms), len(other.round_ms))
    if not n or baseline_of(row)[:n] != baseline_of(other)[:n]:
        return [], []
    return list(row.round_ms)[:n], list(other.round_ms)[:n]


def against(row, reference) -> Interval | None:
    """Speed-up of `row` over another contestant of the same rounds (`reference`, not the baseline: cuDNN's SDPA,
    the model's own code): per round, reference's median burst over row's; None unless both rows took part in the
    same rounds (aligned on the same baseline medians)."""
    mine, theirs = shared_rounds(row, reference)
    return median_interval(ratios(mine, theirs)) if mine else None


def per_round_spread(ratios) -> float | None:
    """How far one round's ratio typically strays, as a fraction: the normal-consistent median absolute deviation of
    the log ratios (scipy.stats.median_abs_deviation; robust to the odd round a background task disturbed). The
    interval of the median narrows from this as the rounds add up."""
    logs = np.log([r for r in ratios if r > 0 and math.isfinite(r)])
    if len(logs) < 3:
        return None
    return float(np.expm1(_scipy().median_abs_deviation(logs, scale="normal")))


def twinned_baselines(df):
    """Which rows are a baseline timed in rounds beside its A/A twin (a boolean Series): the rows a noise floor is
    read from."""
    return ((df.pairing.fillna("") != "") & df.round_ms.map(len).gt(0) & df.baseline_round_ms.map(len).eq(0)
            & df.aa_round_ms.map(len).gt(0))


def mann_whitney(samples, baseline_samples) -> float | None:
    if len(samples) < 3 or len(baseline_samples) < 3:
        return None
    return float(_scipy().mannwhitneyu(samples, baseline_samples, alternative="two-sided").pvalue)


def add_paired_columns(df):
    """speedup / speedup_lo / speedup_hi, p_value, q_value, aa (A/A ratio) / aa_lo / aa_hi per row."""
    import pandas as pd

    df = df.copy()
    cols = {c: [np.nan] * len(df) for c in ("speedup", "speedup_lo", "speedup_hi", "p_value", "aa", "aa_lo",
                                             "aa_hi")}
    group_keys = ["run_id", "cell", "kernel", "workload", "dtype"]
    # only the columns read below: itertuples over every column of a run costs more than the statistics
    rows = list(df[[*group_keys, "status", "pairing", "round_ms", "baseline_round_ms", "aa_round_ms",
                    "build_round_ms", "samples_ms"]].itertuples(index=False))
    baselines = {tuple(getattr(r, k) for k in group_keys): r  # the baseline: paired with its twin only
                 for r, twinned in zip(rows, (df.status == "ok") & twinned_baselines(df)) if twinned}
    for i, r in enumerate(rows):
        if r.status != "ok" or not r.pairing:
            continue
        if len(r.baseline_round_ms):
            interval = builds_interval(build_ratios(r))
            if interval:
                cols["speedup"][i], cols["speedup_lo"][i], cols["speedup_hi"][i] = interval.estimate, interval.lo, \
                    interval.hi
            base = baselines.get(tuple(getattr(r, k) for k in group_keys))
            if len(r.aa_round_ms):  # the row's per-round ratios against the twin's: drift cancelled on both sides
                p = mann_whitney(ratios(r.round_ms, r.baseline_round_ms), ratios(r.aa_round_ms, r.baseline_round_ms))
            else:
                p = mann_whitney(list(r.samples_ms), list(base.samples_ms)) if base is not None else None
            cols["p_value"][i] = np.nan if p is None else p
        reference = r.baseline_round_ms if len(r.baseline_round_ms) else r.round_ms
        if len(r.aa_round_ms):
            aa = median_interval(ratios(r.aa_round_ms, reference))
            if aa:
                cols["aa"][i], cols["aa_lo"][i], cols["aa_hi"][i] = aa.estimate, aa.lo, aa.hi
    for name, values in cols.items():
        df[name] = pd.array(values, dtype="float64")
    pvals = df.p_value.notna()
    df["q_value"] = np.nan
    if pvals.any():
        df.loc[pvals, "q_value"] = _scipy().false_discovery_control(df.loc[pvals, "p_value"].to_numpy(),
                                                                    method="bh")
    return df
