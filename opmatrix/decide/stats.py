"""Paired statistics of each timed row against the baseline of its own rounds.

A row timed in rounds (`pairing = "interleaved"`) carries, aligned by round, its median burst time, the baseline's
and the baseline A/A twin's. From these alone:
- speed-up = median over rounds of baseline / row, with a 95 % interval that covers the variation within the rounds
  AND between worker processes, as the run's A/A twins measure it (opmatrix.decide.intervals: order-statistic
  bounds of the median, widened by a random-effects term estimated from the run's twins; computed for every row of
  one round count at once);
- p-value: Mann-Whitney U (scipy.stats.mannwhitneyu, batched over rows) of the row's per-round ratios to the
  baseline against the A/A twin's per-round ratios to the same baseline: both sides are paired, so a power-state
  drift between rounds cancels (on the raw samples it would swamp a 10 % difference); without a twin, on the raw
  samples. q-values by Benjamini-Hochberg over every paired row of the run (scipy.stats.false_discovery_control);
- the A/A noise floor: the twin's ratio to the baseline in the same rounds, its within-rounds interval's
  half-width around 1 (the rounds' noise: the threshold's unit; the process term is in the contestants' intervals,
  and opmatrix calibration judges the twin's interval widened like a contestant's);
- with `[run] builds` >= 2, every contestant was built that many times, each build in its own worker, all timed in
  the same rounds: the build, not the round, is then the unit a new run would draw afresh. The speed-up is the
  geometric mean of the builds' median ratios, and its interval that of every build's rounds pooled, joined with
  a random-effects interval: the variance between builds that their medians' spread shows beyond their rounds'
  noise (which one build's rounds cannot show), at the Welch-Satterthwaite degrees of freedom (_widened).
Rows without rounds (older runs, correctness-only, failures) get no interval: they are never compared.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from opmatrix.core import straying
from opmatrix.decide import intervals
from opmatrix.decide.intervals import CONFIDENCE, ProcessTerm
from opmatrix.store import frame_rows

RESAMPLES = 2000
MWU_ROWS = 16384  # rows per batched Mann-Whitney U call (_p_values)
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


def median_interval(ratios, confidence: float = CONFIDENCE, term: ProcessTerm | None = None) -> Interval | None:
    """Median of per-round ratios with its interval (within the rounds, and between processes where `term` gives
    the run's A/A measure of it); None with fewer than 3 rounds."""
    return _intervals(intervals.batch([list(ratios)], confidence), term or ProcessTerm(), confidence)[0]


def _intervals(b: intervals.Batch, term: ProcessTerm, confidence: float = CONFIDENCE) -> list[Interval | None]:
    lo, hi = b.widened(term, confidence)
    return [None if not n == n else Interval(float(e), float(low), float(high), int(n))
            for e, low, high, n in zip(b.estimate, lo, hi, b.n)]


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


def builds_interval(per_build: list[list[float]], confidence: float = CONFIDENCE,
                    term: ProcessTerm | None = None) -> Interval | None:
    """An estimate over independent builds, each given by its own per-round values (ratios): the geometric mean of
    the builds' medians, its interval that of all builds' rounds pooled, joined with the random-effects interval
    over the builds (_widened). One build: the interval of its rounds. None with fewer than 3 rounds in any
    build."""
    builds = [[v for v in values if v > 0 and math.isfinite(v)] for values in per_build]
    builds = [b for b in builds if b]
    if not builds or any(len(b) < 3 for b in builds):
        return None
    pooled = median_interval([v for b in builds for v in b], confidence, term)  # >= 3 values: never None
    if len(builds) == 1:
        return pooled
    return _widened([float(np.median(b)) for b in builds], intervals.median_errors(builds, confidence),
                    sum(map(len, builds)), pooled, confidence)


def _widened(per_build: list[float], errors, rounds: int, pooled: Interval, confidence: float) -> Interval:
    """The geometric mean of per-build ratios, its interval `pooled` joined with a random-effects one: the builds'
    log medians vary by their rounds' noise (`errors`, each median's log standard error) plus a variance between
    builds, estimated as what their spread leaves beyond that noise (never below 0: the moment estimator, as for
    the twins' between-process term). The geometric mean's variance is the mean of both over the builds, and its
    reach Student's t at the Welch-Satterthwaite degrees of freedom (intervals.welch_reach: a between-build
    variance from two or three builds is uncertain and widens the interval; a spread the rounds' noise explains adds
    nothing, where a t-interval over two builds' medians (t = 12.7) would make a 3 % difference noise made into
    ±40 %)."""
    logs, errors = np.log(per_build), np.asarray(errors, dtype=float)
    estimate = float(np.exp(np.mean(logs)))
    k = len(logs)
    noise = float(np.mean(errors ** 2)) if np.isfinite(errors).all() else 0.0
    between = max(0.0, float(np.var(logs, ddof=1)) - noise) if k > 1 else 0.0
    if between == 0.0:
        return Interval(estimate, min(pooled.lo, estimate), max(pooled.hi, estimate))
    reach = float(intervals.welch_reach(noise / k, max(1, rounds - 1), between / k, k - 1, confidence))
    return Interval(estimate, min(estimate * math.exp(-reach), pooled.lo), max(estimate * math.exp(reach), pooled.hi))


def geomean_builds_interval(per_build_sets: list[list[list[float]]],
                            confidence: float = CONFIDENCE) -> Interval | None:
    """geomean_interval over workloads when each workload's contestant had several builds: per_build_sets[w][b] is
    workload w's per-round ratios of build b. Build b's geometric mean over the workloads (of its median ratios) is
    one draw of the contestant's geometric mean (builds are independent and exchangeable, so pairing them across
    workloads by index is as good as any), its error from its workloads' medians' errors; the pooled bootstrap
    interval joined with the random-effects interval over those draws, as in builds_interval."""
    pooled = geomean_interval([[v for b in builds for v in b] for builds in per_build_sets], confidence)
    counts = {len(builds) for builds in per_build_sets}
    if pooled is None or counts == {1} or len(counts) != 1:
        return pooled  # one build each, or builds that failed unevenly across workloads: rounds only
    count = counts.pop()
    draws = [float(np.exp(np.mean([np.log(np.median(builds[b])) for builds in per_build_sets])))
             for b in range(count)]
    # a draw's error: the mean of its workloads' log medians, each with its own error
    errors = [intervals.median_errors(builds, confidence) for builds in per_build_sets]
    draw_errors = np.sqrt(np.sum(np.square(errors), axis=0)) / len(per_build_sets)
    return _widened(draws, draw_errors, min(sum(map(len, builds)) for builds in per_build_sets), pooled, confidence)


def geomean_of(rows: list[Interval]) -> Interval | None:
    """The geometric mean of independent rows' speed-ups (one per workload: each timed by workers of its own), its
    interval from theirs on the log scale, each side from the same side of every row: the distances below the
    estimates added in quadrature for the lower bound, those above for the upper bound, each over the count (each
    row's interval already carries its between-process term). A long slow tail stays a slow tail: it never
    becomes a fast one. Clamped to the rows' own reach (within_rows). None when a row has no interval."""
    if not rows or any(not (r.lo == r.lo and r.hi == r.hi and r.lo > 0) for r in rows):
        return None
    logs = np.log([[r.estimate, r.lo, r.hi] for r in rows])
    below = np.sqrt(np.sum(np.maximum(logs[:, 0] - logs[:, 1], 0.0) ** 2)) / len(rows)
    above = np.sqrt(np.sum(np.maximum(logs[:, 2] - logs[:, 0], 0.0) ** 2)) / len(rows)
    centre = float(np.mean(logs[:, 0]))
    return within_rows(Interval(float(np.exp(centre)), float(np.exp(centre - below)), float(np.exp(centre + above))),
                       rows)


def within_rows(combined: Interval | None, rows: list[Interval]) -> Interval | None:
    """`combined` (an interval of the geometric mean over rows) kept inside what the rows themselves allow: a
    geometric mean of values each at least lo_i is at least min(lo_i), and at most max(hi_i). So a contestant whose
    every workload is slower (every hi_i < 1) is slower overall, and one clear of a bar on every workload is clear
    of it overall."""
    if combined is None or not rows:
        return combined
    lo, hi = min(r.lo for r in rows), max(r.hi for r in rows)
    return Interval(combined.estimate, min(max(combined.lo, lo), combined.estimate),
                    max(min(combined.hi, hi), combined.estimate), combined.samples)


def joined(a: Interval | None, b: Interval | None) -> Interval | None:
    """`a` widened to reach `b`'s bounds too (either alone where the other is None)."""
    if a is None or b is None:
        return a or b
    return Interval(a.estimate, min(a.lo, b.lo), max(a.hi, b.hi), a.samples)


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


GROUP_KEYS = ["run_id", "cell", "kernel", "workload", "dtype"]  # rows timed in rounds with one baseline


def round_group_key(r) -> tuple:
    """The rounds a row was timed in: its round_group id, else (older rows) its run, cell, kernel, workload, dtype."""
    return (r.run_id, r.round_group) if r.round_group else tuple(getattr(r, k) for k in GROUP_KEYS)


def twin_rows(rows: list) -> dict[tuple, int]:
    """Per round group, the index of the row whose A/A twin speaks for it: the baseline's own row (its twin took
    part in every round), else (a group of a resumed session with no baseline row) its row with the most rounds."""
    chosen: dict[tuple, int] = {}
    for i, r in enumerate(rows):
        if r.status != "ok" or not r.pairing or not len(r.aa_round_ms):
            continue
        key, own = round_group_key(r), not len(r.baseline_round_ms)
        j = chosen.get(key)
        if j is None or (own, len(r.round_ms)) > (not len(rows[j].baseline_round_ms), len(rows[j].round_ms)):
            chosen[key] = i
    return chosen


def process_terms(rows: list, aa: intervals.Batch, twins: dict[tuple, int]) -> dict[tuple, ProcessTerm]:
    """(run_id, device) -> the between-process term its round groups' twins measure (opmatrix.decide.intervals)."""
    by_run: dict[tuple, list[int]] = {}
    for i in twins.values():
        if aa.n[i] == aa.n[i]:
            by_run.setdefault((rows[i].run_id, rows[i].device), []).append(i)
    if not by_run:  # no twin with rounds: no term (and no scipy import for a run without any)
        return {}
    se = aa.median_error()
    return {key: ProcessTerm.from_twins(np.log(aa.estimate[idx]), se[idx], aa.spread[idx])
            for key, idx in by_run.items()}


READS = [*GROUP_KEYS, "device", "round_group", "status", "pairing", "round_ms", "baseline_round_ms", "aa_round_ms",
         "build_round_ms", "samples_ms"]


def add_paired_columns(df, between_processes: bool = True):
    """speedup / speedup_lo / speedup_hi, p_value, q_value, aa (A/A ratio) / aa_lo / aa_hi per row; every interval
    computed for all rows of one round count at once. between_processes=False leaves the between-process term out
    (within the rounds only: what opmatrix calibration compares the default against)."""
    import pandas as pd

    stored = frame_rows(df, READS)  # only the columns read below: every column of a run costs more than the statistics
    rows, strays, notes = without_strays(stored)
    paired = [r.status == "ok" and bool(r.pairing) for r in rows]
    contest = [i for i, r in enumerate(rows) if paired[i] and len(r.baseline_round_ms)]
    with_aa = [i for i, r in enumerate(rows) if paired[i] and len(r.aa_round_ms)]
    aa_groups = ratio_groups(with_aa, [rows[i].aa_round_ms for i in with_aa],
                             [rows[i].baseline_round_ms if len(rows[i].baseline_round_ms) else rows[i].round_ms
                              for i in with_aa])
    aa = intervals.from_groups(len(rows), aa_groups)
    terms = process_terms(rows, aa, twin_rows(rows)) if between_processes else {}
    term_of = [terms.get((r.run_id, r.device), ProcessTerm()) for r in rows]
    cols = {c: np.full(len(rows), np.nan) for c in ("speedup", "speedup_lo", "speedup_hi", "aa", "aa_lo", "aa_hi")}
    own_groups = ratio_groups(contest, [rows[i].baseline_round_ms for i in contest],
                              [rows[i].round_ms for i in contest])
    speed = intervals.from_groups(len(rows), own_groups)
    for term in set(term_of):
        at = np.asarray([t == term for t in term_of])
        lo, hi = speed.widened(term)
        cols["speedup"][at], cols["speedup_lo"][at], cols["speedup_hi"][at] = speed.estimate[at], lo[at], hi[at]
    # the A/A noise floor stays the rounds' own: the threshold is 1 + K_AA x the noise of the rounds, and the
    # process term is already in every contestant's interval (opmatrix calibration widens the twin's like one)
    cols["aa"], cols["aa_lo"], cols["aa_hi"] = aa.estimate, aa.lo, aa.hi
    for i in contest:
        if len(rows[i].build_round_ms):  # several builds: the build is the unit (builds_interval)
            interval = builds_interval(build_ratios(rows[i]), term=term_of[i])
            if interval:
                cols["speedup"][i], cols["speedup_lo"][i], cols["speedup_hi"][i] = interval.estimate, interval.lo, \
                    interval.hi
    cols["p_value"] = p_values = _p_values(rows, contest, own_groups, aa_groups)
    cols["q_value"] = np.full(len(rows), np.nan)
    if (known := ~np.isnan(p_values)).any():
        cols["q_value"][known] = _scipy().false_discovery_control(p_values[known], method="bh")
    cols["strayed_rounds"] = np.asarray([len(s.left_out) if s.total else np.nan for s in strays], dtype=float)
    # a new frame (the given one is left as it was); under pandas' copy-on-write it shares the given one's columns
    # instead of copying every one of them
    return df.assign(**{name: pd.array(values, dtype="float64") for name, values in cols.items()},
                     stray_note=pd.array(notes, dtype="string"))


def series_of(row) -> dict[str, list[float]]:
    """A row's aligned round series by whose they are: its own, the baseline's, the A/A twin's, each further
    build's (the names its stray note uses)."""
    own = list(row.round_ms)
    out = {"this row": own, "the baseline": list(row.baseline_round_ms), "the A/A twin": list(row.aa_round_ms)}
    for n, build in enumerate(build_series(own, row.build_round_ms)[1:], start=2):
        out[f"build {n}"] = build
    return {name: values for name, values in out.items() if values}


def without_strays(rows: list) -> tuple[list, list[straying.Strays], list[str]]:
    """The rows with the rounds that strayed (opmatrix.core.straying: in the row's own series, the baseline's,
    the twin's or a further build's) left out of every aligned series, what strayed in each row, and its note. The
    rows hand their rounds to every interval, p-value and A/A floor below: one rule, applied once."""
    out, found, notes = [], [], []
    for r in rows:
        if r.status != "ok" or not r.pairing or len(r.round_ms) < straying.MIN_ROUNDS:
            out.append(r)
            found.append(straying.Strays())
            notes.append("")
            continue
        series = series_of(r)
        strays = straying.of_rounds(*series.values())
        found.append(strays)
        notes.append(straying.describe(strays, series))
        gone = set(strays.left_out)
        if not gone:
            out.append(r)
            continue
        n = len(r.round_ms)

        def keep(values) -> list[float]:
            return [v for i, v in enumerate(values) if i % n not in gone] if len(values) % n == 0 else list(values)
        out.append(r._replace(round_ms=keep(r.round_ms), baseline_round_ms=keep(r.baseline_round_ms),
                              aa_round_ms=keep(r.aa_round_ms), build_round_ms=keep(r.build_round_ms)))
    return out, found, notes


def ratio_groups(at: list[int], numerators: list, denominators: list) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """per_round(numerator, denominator) of rows `at`, as {round count: (row indices, (rows, count) array)}: rows
    whose two series have the same lengths are divided as one array; a row with a non-positive or non-finite time
    has those rounds left out (per_round), and joins the group of the count left."""
    by_shape: dict[tuple[int, int], list[int]] = {}
    for k, (num, den) in enumerate(zip(numerators, denominators)):
        by_shape.setdefault((len(num), len(den)), []).append(k)
    parts: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    for (a, b), ks in by_shape.items():
        n = min(a, b)
        if n == 0:
            continue
        num = np.asarray([numerators[k] for k in ks], dtype=float).reshape(len(ks), a)[:, :n]
        den = np.asarray([denominators[k] for k in ks], dtype=float).reshape(len(ks), b)[:, :n]
        with np.errstate(divide="ignore", invalid="ignore"):
            values = num / den
        clean = ((num > 0) & (den > 0) & np.isfinite(values)).all(axis=1)
        idx = np.asarray([at[k] for k in ks])
        parts.setdefault(n, []).append((idx[clean], values[clean]))
        for k in np.flatnonzero(~clean):
            kept = [v for v in per_round(numerators[ks[k]], denominators[ks[k]]) if math.isfinite(v)]
            parts.setdefault(len(kept), []).append((idx[k:k + 1], np.asarray([kept], dtype=float)))
    return {n: (np.concatenate([p[0] for p in ps]), np.concatenate([p[1].reshape(len(p[0]), n) for p in ps]))
            for n, ps in parts.items()}


def _positions(groups: dict) -> dict[int, tuple[int, int]]:
    """row index -> (round count, position in that group's array)."""
    return {int(i): (n, k) for n, (rows, _) in groups.items() for k, i in enumerate(rows)}


def _p_values(rows: list, contest: list[int], own_groups: dict, aa_groups: dict) -> np.ndarray:
    """Mann-Whitney U per contestant: its per-round ratios against its twin's (batched over rows whose two series
    have the same lengths), else its samples against the baseline's of its rounds."""
    out = np.full(len(rows), np.nan)
    baselines = {tuple(getattr(r, k) for k in GROUP_KEYS): r for r in rows
                 if r.status == "ok" and r.pairing and not len(r.baseline_round_ms) and len(r.round_ms)
                 and len(r.aa_round_ms)}
    own, twin = _positions(own_groups), _positions(aa_groups)
    pairs: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for i in contest:
        r = rows[i]
        if len(r.aa_round_ms):
            if i in own and i in twin and own[i][0] >= 3 and twin[i][0] >= 3:
                pairs.setdefault((own[i][0], twin[i][0]), []).append((i, own[i][1], twin[i][1]))
        elif (base := baselines.get(tuple(getattr(r, k) for k in GROUP_KEYS))) is not None:
            p = mann_whitney(list(r.samples_ms), list(base.samples_ms))
            out[i] = np.nan if p is None else p
    for (n, m), found in pairs.items():
        # Over 8 rounds on both sides, scipy takes the asymptotic test for every row, each row on its own: the rows go
        # in blocks of MWU_ROWS (its ranks are several arrays the size of the block). With fewer, its choice between
        # the exact and the asymptotic test looks at the ties of every row given at once: they go together.
        step = MWU_ROWS if min(n, m) > 8 else len(found)
        for start in range(0, len(found), step):
            block = found[start:start + step]
            x = own_groups[n][1][[f[1] for f in block]]
            y = aa_groups[m][1][[f[2] for f in block]]
            out[[f[0] for f in block]] = _scipy().mannwhitneyu(x, y, alternative="two-sided", axis=1).pvalue
    return out
