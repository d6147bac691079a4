"""Do the intervals cover what they claim? Recomputed from stored rounds alone (no device needed):
- **A/A coverage**: an A/A twin is an identical build of the baseline, so its interval should contain 1.0 in 95 % of
  round groups. Counted three ways: as the report computes it (the between-process term from every twin of the
  run), leave-one-out (the twin's own offset left out of the term that widens it: the strict reading), and within
  the rounds only (no between-process term: what the intervals covered before it);
- **identical-run agreement**: two runs of the same matrix on the same machine should give overlapping intervals
  on (almost) every row.
Runs with rows timed in rounds but no A/A twin cannot get the between-process term (nothing measured their
processes); they are named, as are runs whose stored rows carry no rounds (never compared)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from opmatrix.core.result import backend_label
from opmatrix.decide import intervals, stats
from opmatrix.decide.intervals import ProcessTerm


@dataclass
class Twin:
    run: str
    device: str
    kernel: str
    workload: str
    dtype: str
    rounds: int
    estimate: float
    lo: float
    hi: float
    lo_out: float  # leave-one-out: the term from the run's other twins
    hi_out: float
    lo_within: float  # within the rounds only
    hi_within: float

    def covers(self, which: str = "") -> bool:
        lo, hi = {"": (self.lo, self.hi), "out": (self.lo_out, self.hi_out),
                  "within": (self.lo_within, self.hi_within)}[which]
        return lo <= 1.0 <= hi


@dataclass
class Pair:
    run_a: str
    run_b: str
    compared: int = 0
    agree: int = 0
    agree_within: int = 0  # without the between-process term
    apart: list[str] = field(default_factory=list)  # the rows whose intervals do not overlap


@dataclass
class Calibration:
    runs: list[str]
    twins: list[Twin] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    no_twin: list[str] = field(default_factory=list)  # timed in rounds without a twin: no between-process term

    def coverage(self, which: str = "") -> tuple[int, int]:
        return sum(t.covers(which) for t in self.twins), len(self.twins)


def twins(df) -> list[Twin]:
    """Every round group's A/A twin (stats.twin_rows) with its interval three ways."""
    rows, _, _ = stats.without_strays(list(df[stats.READS].itertuples(index=False)))  # as the report reads them
    chosen = sorted(stats.twin_rows(rows).values())
    aa = intervals.from_groups(len(rows), stats.ratio_groups(
        chosen, [rows[i].aa_round_ms for i in chosen],
        [rows[i].baseline_round_ms if len(rows[i].baseline_round_ms) else rows[i].round_ms for i in chosen]))
    terms = stats.process_terms(rows, aa, {i: i for i in chosen})
    se, out = aa.median_error(), []
    lo_within, hi_within = aa.widened(ProcessTerm())
    for i in chosen:
        if aa.n[i] != aa.n[i]:
            continue
        r = rows[i]
        others = [j for j in chosen if j != i and rows[j].run_id == r.run_id and rows[j].device == r.device
                  and aa.n[j] == aa.n[j]]
        loo = ProcessTerm.from_twins(np.log(aa.estimate[others]), se[others], aa.spread[others])
        lo, hi = _widened_row(aa, i, terms[(r.run_id, r.device)])
        lo_out, hi_out = _widened_row(aa, i, loo)
        out.append(Twin(r.run_id, r.device, r.kernel, r.workload, r.dtype, int(aa.n[i]), float(aa.estimate[i]), lo,
                        hi, lo_out, hi_out, float(lo_within[i]), float(hi_within[i])))
    return out


def _widened_row(b: intervals.Batch, i: int, term: ProcessTerm) -> tuple[float, float]:
    one = intervals.Batch(*(getattr(b, k)[i:i + 1] for k in ("estimate", "lo", "hi", "spread", "n")))
    lo, hi = one.widened(term)
    return float(lo[0]), float(hi[0])


def speedups(df, between_processes: bool = True) -> dict[tuple, tuple[float, float, float]]:
    """(kernel, workload, dtype, backend[variant], toolchain) -> (speed-up, lo, hi) of every contestant row with an
    interval (the baseline is not paired with itself)."""
    df = stats.add_paired_columns(df, between_processes)
    df = df[(df.status == "ok") & df.speedup_lo.notna() & df.baseline_round_ms.map(len).gt(0)]
    return {(r.kernel, r.workload, r.dtype, backend_label(r.backend, r.variant), r.toolchain):
            (r.speedup, r.speedup_lo, r.speedup_hi) for r in df.itertuples()}


def pair(df_a, df_b, run_a: str, run_b: str) -> Pair:
    """Do two identical runs' intervals overlap, row by row (with and without the between-process term)?"""
    out = Pair(run_a, run_b)
    a, b = speedups(df_a), speedups(df_b)
    a_in, b_in = speedups(df_a, False), speedups(df_b, False)
    both = sorted(set(a) & set(b))
    out.compared = len(both)
    for key in both:
        if _overlap(a[key], b[key]):
            out.agree += 1
        else:
            out.apart.append(" ".join(key[:4]) + " A {:.3f} [{:.3f}, {:.3f}]".format(*a[key])
                             + " B {:.3f} [{:.3f}, {:.3f}]".format(*b[key]))
        out.agree_within += _overlap(a_in[key], b_in[key])
    return out


def _overlap(x, y) -> bool:
    return not (x[1] > y[2] or y[1] > x[2])


def without_twin(df) -> bool:
    """Rows timed in rounds, none with an A/A twin: such a run's intervals cannot carry the between-process term."""
    paired = (df.status == "ok") & (df.pairing.fillna("") != "") & df.round_ms.map(len).gt(0)
    return bool(paired.any()) and not bool(df[paired].aa_round_ms.map(len).gt(0).any())


def percent(n: int, of: int) -> str:
    return f"{n}/{of} ({100 * n / of:.1f} %)" if of else "0/0"
