"""What a speed-up's interval covers, computed for many rows at once.

A row's per-round ratios (baseline / row, or twin / baseline) give two kinds of variation:
- **within the rounds**: how far the median of these rounds could move if the same processes ran the rounds again.
  The interval is the distribution-free one for a median, from order statistics (the ranks where a binomial(n, ½)
  leaves at most 2.5 % on either side: scipy.stats.binom), vectorised over every row with the same round count;
- **between processes**: an identical second build of the baseline in a worker of its own (the A/A twin) does not
  read 1.0 even over many rounds: a process's buffer placement, clocks and caches are drawn once per worker and
  stay for all its rounds. A contestant's ratio carries that draw too, and no resampling of its rounds can show it.
  The twins of one run measure it: each twin's log offset d from 1 is one draw of the difference of two processes,
  with the within-rounds variance s² on top, so d² - s² estimates it (the moment estimator of a random-effects
  model). Two estimates from the run's twins, per device: a term common to every row (`pooled`) and one
  proportional to the row's own per-round variance (`per_spread`: noisy, short calls also differ more between
  processes); a row takes the larger. It is estimated only where the twins' offsets are more than their rounds'
  noise explains (Cochran's Q beyond its chi² HETEROGENEITY quantile): otherwise chance offsets of identical
  processes would widen every interval of a run. Either way it is never below PROCESS_FLOOR (0.2 %), the least
  two identical processes were measured to differ by.
A row's interval is its median times exp(± t · sqrt(s² + τ²)) on the log scale, where t is Student's quantile at
the Welch-Satterthwaite degrees of freedom (the rounds for s², the number of twins for τ²: a term estimated from
few twins is uncertain and the interval says so), joined with the within-rounds interval. A run (device) with fewer
than MIN_TWINS twins gets the within-rounds interval alone: one twin's offset is a single draw that, used as a
variance with one degree of freedom, makes every interval of the run either blind to it or many times wider
(opmatrix calibration names the runs without a twin).
Every raw round is stored, so any run is re-judged by recomputing this; `opmatrix calibration` measures what the
intervals cover on stored runs.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
MIN_ROUNDS = 3  # fewer per-round values: no interval
HETEROGENEITY = 0.99  # the term is estimated only where Cochran's Q of the twins' offsets exceeds this chi² quantile
MIN_TWINS = 2  # a between-process term from one twin (one draw of d² - s², one degree of freedom) is not used
# Two identical processes are never taken to agree closer than this (a log standard deviation): the committed H200
# and H100 runs' 271 A/A twins have a median |log offset| of 0.15 %, a half-normal sigma of 0.22 % (0.34 % in the
# first 155, 0.17 % in the later 116), and a run's few twins seldom show Cochran's Q beyond its gate when the
# difference is this small. Without it 92.3 % of those twins' intervals held 1.0 (87.1 % leave-one-out); with it
# 97.8 % (97.4 %): reports/20261207-calibration/NOTES.md.
PROCESS_FLOOR = 0.002


def _scipy():
    """scipy.stats, imported when first needed (it costs a second)."""
    from scipy import stats

    return stats


@functools.lru_cache(maxsize=16)
def _z(confidence: float) -> float:
    return float(_scipy().norm.ppf(0.5 + confidence / 2))


@dataclass(frozen=True)
class ProcessTerm:
    """The between-process variance (of log ratios) that a run's A/A twins show, beyond their rounds' noise."""
    pooled: float = 0.0  # the same for every row
    per_spread: float = 0.0  # times a row's per-round log variance
    twins: int = 0  # how many twins it was estimated from (its degrees of freedom)

    @classmethod
    def from_twins(cls, offsets, within, spreads) -> ProcessTerm:
        """From each twin's log offset from 1 (d), the log standard error of its median within the rounds (s) and
        its per-round log spread: mean(d² - s²), and mean((d² - s²) / spread²) over twins with a spread; never
        below 0."""
        d, s, sp = (np.asarray(x, dtype=float) for x in (offsets, within, spreads))
        if len(d) < MIN_TWINS:
            return cls()
        within = s > 0
        if within.any() and float(np.sum((d[within] / s[within]) ** 2)) <= _scipy().chi2.ppf(HETEROGENEITY,
                                                                                             int(within.sum())):
            return cls(twins=len(d))  # offsets their rounds' noise explains (Cochran's Q): the floor alone
        excess = d ** 2 - s ** 2
        spread = sp > 0
        per_spread = float(np.mean(excess[spread] / sp[spread] ** 2)) if spread.any() else 0.0
        return cls(max(0.0, float(np.mean(excess))), max(0.0, per_spread), len(d))

    def variance(self, spreads) -> np.ndarray:
        return np.maximum(self.pooled, self.per_spread * np.asarray(spreads, dtype=float) ** 2)


@dataclass
class Batch:
    """Per-row medians of positive per-round values, their within-rounds bounds, log spread and round count (NaN
    where a row has fewer than MIN_ROUNDS values)."""
    estimate: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    spread: np.ndarray  # normal-consistent median absolute deviation of the log values
    n: np.ndarray

    def median_se(self) -> np.ndarray:
        """The log standard error of the median from the rounds' spread (√(π/2) σ / √n). A twin's offset is weighed
        by the larger of this and within_se (ProcessTerm.from_twins): either alone, on ten rounds, is now and then
        small enough by chance to make noise look like a difference between processes."""
        return np.sqrt(np.pi / 2) * self.spread / np.sqrt(self.n)

    def within_se(self, confidence: float = CONFIDENCE) -> np.ndarray:
        """The log standard error the within-rounds bounds stand for."""
        return (np.log(self.hi) - np.log(self.lo)) / (2 * _z(confidence))

    def median_error(self, confidence: float = CONFIDENCE) -> np.ndarray:
        """The log standard error a row's median is weighed by: the larger of median_se and within_se."""
        return np.fmax(self.median_se(), self.within_se(confidence))

    def widened(self, term: ProcessTerm, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi) with the between-process term added (module docstring)."""
        if not term.twins:  # no process term: the distribution-free bounds as they are
            return np.fmin(self.lo, self.estimate), np.fmax(self.hi, self.estimate)
        lo, hi = self._floored(confidence)
        t2 = term.variance(self.spread)
        reach = welch_reach(self.within_se(confidence) ** 2, np.maximum(self.n - 1, 1), t2, term.twins, confidence)
        reach = np.where(t2 > 0, reach, 0.0)  # a row whose term is 0: its floored distribution-free bounds
        return np.fmin(lo, self.estimate * np.exp(-reach)), np.fmax(hi, self.estimate * np.exp(reach))

    def _floored(self, confidence: float) -> tuple[np.ndarray, np.ndarray]:
        """The distribution-free bounds, each side's log distance from the median combined in quadrature with
        PROCESS_FLOOR's reach: an asymmetric interval stays asymmetric (a slow tail never becomes a fast one)."""
        floor = _z(confidence) * PROCESS_FLOOR
        with np.errstate(divide="ignore", invalid="ignore"):
            below = np.log(self.estimate / np.fmin(self.lo, self.estimate))
            above = np.log(np.fmax(self.hi, self.estimate) / self.estimate)
        return (self.estimate * np.exp(-np.sqrt(below ** 2 + floor ** 2)),
                self.estimate * np.exp(np.sqrt(above ** 2 + floor ** 2)))


def welch_reach(s2, dof_within, t2, dof_between, confidence: float = CONFIDENCE):
    """How far (on the log scale) an interval reaches for a variance s2 known from the rounds plus a variance t2
    estimated from few draws (twins, builds): Student's t at the Welch-Satterthwaite degrees of freedom times
    sqrt(s2 + t2). A term from few draws is uncertain and the reach says so; a small one costs little."""
    s2, t2 = np.asarray(s2, dtype=float), np.asarray(t2, dtype=float)
    total = s2 + t2
    with np.errstate(divide="ignore", invalid="ignore"):
        dof = total ** 2 / (s2 ** 2 / dof_within + t2 ** 2 / dof_between)
    dof = np.where(np.isfinite(dof) & (dof > 0), dof, dof_within)
    return _scipy().t.ppf(0.5 + confidence / 2, np.maximum(dof, 1.0)) * np.sqrt(total)


def median_errors(series: list, confidence: float = CONFIDENCE) -> np.ndarray:
    """Batch.median_error of each series (lists of per-round values); NaN under MIN_ROUNDS values."""
    return batch(series, confidence).median_error(confidence)


def positive(values) -> list[float]:
    return [v for v in values if v > 0 and math.isfinite(v)]


def batch(series: list, confidence: float = CONFIDENCE) -> Batch:
    """Batch over rows given as lists of per-round values (non-positive and non-finite values left out)."""
    cleaned = [positive(s) for s in series]
    by_length: dict[int, list[int]] = {}
    for i, values in enumerate(cleaned):
        by_length.setdefault(len(values), []).append(i)
    groups = {n: (np.asarray(rows), np.asarray([cleaned[i] for i in rows], dtype=float).reshape(len(rows), n))
              for n, rows in by_length.items()}
    return from_groups(len(cleaned), groups, confidence)


def from_groups(size: int, groups: dict, confidence: float = CONFIDENCE) -> Batch:
    """Batch of `size` rows from {round count: (row indices, (rows, count) array of positive values)}: each round
    count computed as one array; rows in no group, or with fewer than MIN_ROUNDS values, are NaN."""
    out = Batch(*(np.full(size, np.nan) for _ in range(5)))
    for n, (rows, values) in groups.items():
        if n < MIN_ROUNDS or not len(rows):
            continue
        values = np.sort(values, axis=1)
        estimate, lo, hi = _median_bounds(values, confidence)
        spread = _scipy().median_abs_deviation(np.log(values), axis=1, scale="normal")
        out.estimate[rows], out.lo[rows], out.hi[rows], out.spread[rows], out.n[rows] = estimate, lo, hi, spread, n
    return out


def _median_bounds(sorted_values: np.ndarray, confidence: float):
    """Median and its distribution-free interval of each row of a sorted (rows, n) array: the order statistics
    x_(j) and x_(n-j+1), j the largest rank whose interval still covers `confidence` (binomial(n, ½)), interpolated
    towards x_(j+1) and x_(n-j) by Hettmansperger and Sheather (1986) so that it covers `confidence`, not the
    next attainable level above it."""
    n = sorted_values.shape[1]
    j, weight = _ranks(n, confidence)
    x = sorted_values
    lo, hi = x[:, j - 1], x[:, n - j]
    if weight is not None:
        lo = (1 - weight) * lo + weight * x[:, j]
        hi = (1 - weight) * hi + weight * x[:, n - j - 1]
    return np.median(x, axis=1), lo, hi


@functools.lru_cache(maxsize=1024)
def _ranks(n: int, confidence: float) -> tuple[int, float | None]:
    """For n rounds: the rank j of _median_bounds and the interpolation weight towards the next rank (None: the
    order statistics as they are). The same for every row of n rounds, so computed once per (n, confidence)."""
    binom = _scipy().binom

    def covered(j: int) -> float:  # P(x_(j) <= median <= x_(n-j+1))
        return 1.0 - 2.0 * float(binom.cdf(j - 1, n, 0.5))

    j = 1
    while j + 1 <= n // 2 and covered(j + 1) >= confidence:
        j += 1
    if j + 1 <= (n + 1) // 2 and covered(j) > confidence > covered(j + 1):
        share = (covered(j) - confidence) / (covered(j) - covered(j + 1))
        return j, (n - j) * share / (j + (n - 2 * j) * share)
    return j, None
