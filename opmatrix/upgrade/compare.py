"""Upgrade risk: is the candidate toolchain safe for what the baseline toolchain ships?

Per (device, kernel, workload, dtype, backend[variant]), the candidate's row against the baseline's:
- coverage: a row that was `ok` (or `compiles` / `lowers` on a device no host has) and is anything else now
  **breaks**; one that was not and is now is an improvement (gained);
- correctness: an error grown towards the tolerance, past half of it or more than 4x the baseline's (and past a
  tenth of the tolerance, so float noise on tiny errors does not count), is a **risk**; both errors are shown;
- performance: time(candidate) / time(baseline) with its 95 % interval. **Paired** (one run of a matrix with a
  [[compare]]: both toolchains' workers timed in the same rounds): the median of the per-round ratios, and a
  Mann-Whitney U test of those ratios against the A/A twin's ratios of the same rounds. **Unpaired** (two stored
  runs): the round is the unit (a round's median, never each sample), a contestant relative to its own run's
  baseline, the ratio of medians with a bootstrap interval resampling each run's rounds, Mann-Whitney U on the
  rounds, and the A/A floors of both runs added; weaker, because power state and clock drift between the runs are
  not cancelled, and said so. The baseline's own absolute time is shown, not judged (one run's clock state against
  another's is not a noise any twin measures). q-values by Benjamini-Hochberg over the comparison's rows.
  **Risk** when q < 0.05 and the interval's lower bound lies beyond the threshold max(acceptance.min_speedup,
  1 + 2 x the row's A/A noise floor); an improvement the same way below 1 / threshold; otherwise the same;
- compile time (tuning included): a risk when more than doubled and at least 5 s longer (one sample per side,
  so only large changes count); the same halving is an improvement.
Per comparison: `breaks` if any row breaks, else `risk` if any row is a risk, else `safe` (and `nothing compared`
when no row ran on either side: a gate fails closed), with a fingerprint diff
(the versions each side imported: Python, torch, Triton, TileLang, driver, runtime).
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from xml.etree import ElementTree as ET

import numpy as np

from opmatrix.core import status
from opmatrix.core.result import backend_label
from opmatrix.core.text import visible
from opmatrix.decide import stats
from opmatrix.decide.verdicts import K_AA, Q_MAX
from opmatrix.mdtable import row
from opmatrix.upgrade.history import KEY  # what a row measured: the same key as the history's
from opmatrix.upgrade.history import VERSION_FIELDS as FINGERPRINT  # the toolchain fingerprint, named once


def _scipy():
    """scipy.stats, imported when a comparison computes an interval or q-values: the parser of every `opmatrix`
    command imports this module (bisect's options name RISK_KINDS) and must not pay scipy's second."""
    from scipy import stats as scipy_stats

    return scipy_stats


SAFE, RISK, BREAKS, NOTHING = "safe", "risk", "breaks", "nothing compared"
IMPROVED, SAME, UNCOMPARED = "improved", "same", "not compared"
COVERED = (status.OK, status.COMPILES, status.LOWERS)
COMPILE_RATIO, COMPILE_MIN_S = 2.0, 5.0
RISK_KINDS = ("time", "correctness", "compile")  # what a row's risk can be about (RowChange.risks)
ERR_GROWTH, ERR_FLOOR_OF_TOL = 4.0, 0.1


@dataclass
class RowChange:
    device: str
    kernel: str
    workload: str
    dtype: str
    label: str
    outcome: str = SAME  # breaks / risk / improved / same / not compared
    why: list[str] = field(default_factory=list)
    risks: list[str] = field(default_factory=list)  # what made it a risk: time, correctness, compile (RISK_KINDS)
    host_floor: float | None = None  # across hosts: how far two hosts of the same software differ (host A/A)
    status_before: str = ""
    status_after: str = ""
    time_ratio: float | None = None  # candidate / baseline time: > 1 is slower
    time_lo: float | None = None
    time_hi: float | None = None
    p_value: float | None = None
    q_value: float | None = None
    threshold: float | None = None
    aa_floor: float | None = None
    rel_err_before: float | None = None
    rel_err_after: float | None = None
    tolerance: float | None = None
    compile_s_before: float | None = None
    compile_s_after: float | None = None

    @property
    def name(self) -> str:
        return f"{self.device} {self.kernel} {self.workload} {self.dtype} {self.label}"

    def ratio_text(self) -> str:
        if self.time_ratio is None:
            return "–"
        return f"{self.time_ratio:.3f}x [{self.time_lo:.3f}, {self.time_hi:.3f}]"


@dataclass
class Comparison:
    baseline: str
    candidate: str
    paired: bool
    min_speedup: float
    runs: list[str]
    verdict: str = SAFE
    fingerprint: list[str] = field(default_factory=list)  # "torch 2.10.0 -> 2.11.0", per device
    rows: list[RowChange] = field(default_factory=list)
    hosts: str = ""  # a comparison across hosts (opmatrix.upgrade.cross_host): the sides, the hosts, the host A/A

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.rows:
            out[r.outcome] = out.get(r.outcome, 0) + 1
        return out


# ---- building comparisons -------------------------------------------------------------------------------------

def declared_pairs(declared: list, df) -> list[tuple[str, str]]:
    """(baseline, candidate) toolchains a run was asked to compare (its matrix's [[compare]], RunManifest.compare),
    else those its rows show were timed together (candidate rows name their peer's toolchain). From the manifest,
    a comparison exists even when nothing ran: then coverage alone is compared."""
    declared = [tuple(pair) for pair in declared or []]
    if declared or "peer_toolchain" not in df.columns:
        return declared
    found = df[df.peer_toolchain.fillna("") != ""][["peer_toolchain", "toolchain"]].drop_duplicates()
    return sorted(zip(found.peer_toolchain, found.toolchain))


def compare_paired(df, baseline: str, candidate: str, min_speedup: float, run_id: str = "",
                   manifest=None) -> Comparison:
    """One run with a [[compare]]: the candidate's rows against the baseline's, from the same rounds. With the
    run's manifest, two rows that ran different sources of their implementation (resumed after an edit) are not
    compared: the difference would be the edit's, not the toolchain's."""
    before = df[df.toolchain == baseline]
    after = df[df.toolchain == candidate]
    comparison = Comparison(baseline, candidate, True, min_speedup, [run_id] if run_id else [])
    comparison.rows = [_edited(b, a) if _ran_other_code(manifest, b, a) else
                       _row_change(b, a, min_speedup, paired=True) for b, a in _matched(before, after)]
    return _finish(comparison, before, after)


def _ran_other_code(manifest, b, a) -> bool:
    if manifest is None:
        return False
    return manifest.ran_other_code(f"{a['kernel']}/{a['backend']}", str(b["started_at"]), str(a["started_at"]))


def _edited(b, a) -> RowChange:
    row = RowChange(*(str(a[k]) for k in KEY[:4]), backend_label(str(a["backend"]), str(a["variant"])),
                    status_before=str(b["status"]), status_after=str(a["status"]), outcome=UNCOMPARED)
    row.why = [f"kernels/{a['kernel']}/{a['backend']} changed between the sessions that ran the two sides (a "
               f"--resume after an edit): they ran different code; compare them from a run that times both on "
               "the same sources"]
    return row


def compare_unpaired(df_a, df_b, baseline: str | None, candidate: str | None, min_speedup: float,
                     runs: list[str], host_floors: dict[str, float] | None = None) -> Comparison:
    """Two stored runs: the baseline toolchain's rows of the first against the candidate's of the second.
    host_floors (RowChange.name -> floor): across hosts, each row's threshold also covers the host A/A."""
    before = df_a if baseline is None else df_a[df_a.toolchain == baseline]
    after = df_b if candidate is None else df_b[df_b.toolchain == candidate]
    names = [_only_toolchain(before, baseline, runs[0], "--baseline"), _only_toolchain(after, candidate, runs[1],
                                                                                        "--candidate")]
    comparison = Comparison(names[0], names[1], False, min_speedup, runs)
    comparison.rows = [_row_change(b, a, min_speedup, paired=False) for b, a in _matched(before, after)]
    for r in comparison.rows:
        floor = (host_floors or {}).get(r.name)
        if floor is not None and r.threshold is not None:
            r.host_floor, r.threshold = floor, max(r.threshold, 1 + K_AA * floor)
    return _finish(comparison, before, after)


class CompareError(ValueError):
    """Stored runs that cannot be compared as asked (the message says what to pass)."""


def _only_toolchain(df, asked: str | None, run: str, flag: str) -> str:
    names = sorted(set(df.toolchain))
    if asked is not None and not names:
        raise CompareError(f"run {run} has no rows of toolchain {asked!r}")
    if len(names) != 1:
        raise CompareError(f"run {run} has toolchains {', '.join(names) or '(none)'}: name the one to compare "
                           f"with {flag} TOOLCHAIN")
    return names[0]


def _matched(before, after):
    """Pairs of rows with the same (device, kernel, workload, dtype, backend, variant)."""
    index = {tuple(str(r[k]) for k in KEY): r for _, r in before.iterrows()}
    for _, a in after.iterrows():
        b = index.get(tuple(str(a[k]) for k in KEY))
        if b is not None:
            yield b, a


def _row_change(b, a, min_speedup: float, paired: bool) -> RowChange:
    row = RowChange(*(str(a[k]) for k in KEY[:4]), backend_label(str(a["backend"]), str(a["variant"])),
                    status_before=str(b["status"]), status_after=str(a["status"]), rel_err_before=_num(b["rel_err"]),
                    rel_err_after=_num(a["rel_err"]), tolerance=_num(a["tolerance"]),
                    compile_s_before=_num(b["compile_s"]), compile_s_after=_num(a["compile_s"]))
    b, a = b.to_dict(), a.to_dict()
    before, after = row.status_before, row.status_after
    if before in COVERED and after != before and not (before != status.OK and after == status.OK):
        error = str(a.get("error") or "")
        row.outcome, row.why = BREAKS, [f"{before} -> {after}" + (f": {error[:160]}" if error else "")]
        return row
    if after in COVERED and before not in COVERED or (after == status.OK and before != status.OK):
        row.outcome, row.why = IMPROVED, [f"gained: {before} -> {after}"]
        return row
    if after != status.OK:
        same = after == before and after not in status.FAILED and after != status.NOT_INSTALLED
        row.outcome = SAME if same else UNCOMPARED  # failing on both sides: nothing is known about the upgrade
        return row
    _timing(row, b, a, min_speedup, paired)
    _correctness(row)
    _compile_time(row)
    return row


def _num(value) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _values(row: dict, column: str) -> list[float]:
    value = row.get(column)
    return [] if value is None or (isinstance(value, float) and math.isnan(value)) else [float(v) for v in value]


def _timing(row: RowChange, b: dict, a: dict, min_speedup: float, paired: bool) -> None:
    if paired:
        slow = stats.per_round(_values(a, "round_ms"), _values(a, "peer_round_ms"))  # candidate / its peer
        aa = stats.per_round(_values(a, "aa_round_ms"), _values(a, "baseline_round_ms"))
        floor = stats.median_interval(aa)
        row.aa_floor = floor.halfwidth if floor is not None else None
        if len(slow) >= 3:
            interval = stats.median_interval(slow)
            row.p_value = stats.mann_whitney(slow, aa) if floor is not None else None
        else:
            interval = _through_baseline(row, b, a)
    else:
        interval = _unpaired(row, b, a)
    if interval is None:
        row.outcome, row.why = UNCOMPARED, ["no timing to compare (fewer than 3 rounds or samples)"]
        return
    row.time_ratio, row.time_lo, row.time_hi = interval.estimate, interval.lo, interval.hi
    row.threshold = max(min_speedup, 1 + K_AA * (row.aa_floor or 0.0))


def _unpaired(row: RowChange, b: dict, a: dict) -> stats.Interval | None:
    """Two stored runs: the ROUND is the unit (a round's median burst, never each sample: samples of one round
    share its power state, and counting them as independent made two runs of identical code differ at q 1e-186).
    A contestant is taken relative to the baseline of its own run's rounds (drift and the run's clock state cancel
    within each run); the baseline itself, and a row that is the baseline in one run only, by its absolute round
    times. The noise floor is the sum of both runs' A/A floors (each side is one draw of its processes), and the
    row says it is unpaired: weaker than a paired run."""
    relative = bool(_values(a, "baseline_round_ms")) and bool(_values(b, "baseline_round_ms"))
    after, before = (_relative(a), _relative(b)) if relative else (_positive(a), _positive(b))
    interval = ratio_of_medians(after, before)
    if interval is None:
        row.why.append("unpaired: fewer than 3 rounds on a side (a run timed without rounds is not judged "
                       "unpaired: its samples are not independent draws)")
        return None
    floors = [_aa_floor(r) for r in (b, a)]
    row.aa_floor = sum(f for f in floors if f is not None) if any(f is not None for f in floors) else None
    if relative:
        row.p_value = stats.mann_whitney(after, before)
        row.why.append(f"unpaired: {len(before)} and {len(after)} rounds as the unit, each run's time relative to "
                       "its own baseline; threshold from both runs' A/A floors")
    else:  # shown, not judged: a whole run's clock state moves every time of it, twin and baseline alike
        row.why.append(f"unpaired: {len(before)} and {len(after)} rounds of absolute times, shown but not judged: "
                       "two runs' clock states cannot be told from a change (time the baseline paired, with "
                       "[[compare]])")
    return interval


def _relative(r: dict) -> list[float]:
    return stats.per_round(_values(r, "round_ms"), _values(r, "baseline_round_ms"))


def _positive(r: dict) -> list[float]:
    return [t for t in _values(r, "round_ms") if t > 0]


def _aa_floor(r: dict) -> float | None:
    """The half-width of a row's A/A interval over its own rounds: its twin against the baseline of those rounds
    (the baseline's own row: against its own times)."""
    reference = _values(r, "baseline_round_ms") or _values(r, "round_ms")
    floor = stats.median_interval(stats.per_round(_values(r, "aa_round_ms"), reference))
    return floor.halfwidth if floor is not None else None


def _through_baseline(row: RowChange, b: dict, a: dict) -> stats.Interval | None:
    """A candidate row timed in other rounds than its peer (a block cut by device memory, or a resumed session):
    each side's time relative to the framework baseline of its own rounds (drift cancelled within each side),
    then the ratio of the two sides' medians with an unpaired bootstrap interval. Weaker than paired, and said so."""
    def relative(r: dict) -> list[float]:
        if not _values(r, "baseline_round_ms"):  # the baseline's own row: 1 in every round
            return [1.0 for t in _values(r, "round_ms") if t > 0]
        return stats.per_round(_values(r, "round_ms"), _values(r, "baseline_round_ms"))

    after, before = relative(a), relative(b)
    interval = ratio_of_medians(after, before)
    if interval is not None:
        row.p_value = stats.mann_whitney(after, before)
        row.why.append("not timed in the same rounds as its peer: each side against the baseline of its own rounds, "
                       "compared unpaired (weaker)")
    return interval


def ratio_of_medians(after: list[float], before: list[float]) -> stats.Interval | None:
    """median(after) / median(before) with a bootstrap interval resampling each side on its own (unpaired)."""
    a, b = np.asarray(after, dtype=float), np.asarray(before, dtype=float)
    if len(a) < 3 or len(b) < 3:
        return None
    estimate = float(np.median(a) / np.median(b))
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        return stats.Interval(estimate, estimate, estimate)

    def statistic(x, y, axis=-1):
        return np.median(x, axis=axis) / np.median(y, axis=axis)

    res = _scipy().bootstrap((a, b), statistic, confidence_level=stats.CONFIDENCE, n_resamples=stats.RESAMPLES,
                        method="percentile", vectorized=True, random_state=np.random.default_rng(stats.SEED))
    lo, hi = res.confidence_interval
    return stats.Interval(estimate, float(lo), float(hi))


def _correctness(row: RowChange) -> None:
    before, after, tol = row.rel_err_before, row.rel_err_after, row.tolerance
    if after is None or tol is None or tol <= 0:
        return
    past_half = after > tol / 2 and (before is None or before <= tol / 2)
    grown = before is not None and after > ERR_GROWTH * before and after > ERR_FLOOR_OF_TOL * tol
    if past_half or grown:
        row.outcome = RISK
        row.risks.append("correctness")
        row.why.append(f"error grew towards the tolerance: {before if before is not None else '?'} -> {after:.3g} "
                       f"(tolerance {tol:.3g})")


def _compile_time(row: RowChange) -> None:
    before, after = row.compile_s_before, row.compile_s_after
    if before is None or after is None:
        return
    if after > COMPILE_RATIO * before and after - before >= COMPILE_MIN_S:
        row.outcome = RISK
        row.risks.append("compile")
        row.why.append(f"compile (and tuning) time {before:.3g} s -> {after:.3g} s")
    elif before > COMPILE_RATIO * after and before - after >= COMPILE_MIN_S and row.outcome == SAME:
        row.outcome = IMPROVED
        row.why.append(f"compiles faster: {before:.3g} s -> {after:.3g} s")


def _finish(comparison: Comparison, before, after) -> Comparison:
    """q-values over the comparison's timed rows, then each row's timing outcome, the verdict, the diff."""
    timed = [r for r in comparison.rows if r.p_value is not None]
    if timed:
        qs = _scipy().false_discovery_control(np.asarray([r.p_value for r in timed]), method="bh")
        for r, q in zip(timed, qs):
            r.q_value = float(q)
    for r in comparison.rows:
        _judge_timing(r)
    order = {BREAKS: 0, RISK: 1, IMPROVED: 2, SAME: 3, UNCOMPARED: 4}
    comparison.rows.sort(key=lambda r: (order[r.outcome], r.name))
    outcomes = {r.outcome for r in comparison.rows}
    comparison.verdict = (BREAKS if BREAKS in outcomes else RISK if RISK in outcomes
                          else NOTHING if outcomes <= {UNCOMPARED} else SAFE)
    comparison.fingerprint = fingerprint_diff(before, after)
    return comparison


def _judge_timing(r: RowChange) -> None:
    if r.time_ratio is None or r.outcome in (BREAKS, UNCOMPARED):
        return
    significant = r.q_value is not None and r.q_value < Q_MAX
    if significant and r.time_lo > r.threshold:
        r.outcome = RISK
        r.risks.append("time")
        r.why.insert(0, f"slower: {r.ratio_text()} the baseline's time (threshold {r.threshold:.3f}, q {r.q_value:.2g})")
    elif significant and r.time_hi < 1 / r.threshold and r.outcome == SAME:
        r.outcome = IMPROVED
        r.why.insert(0, f"faster: {r.ratio_text()} the baseline's time (q {r.q_value:.2g})")


def fingerprint_diff(before, after) -> list[str]:
    """What each side imported, where it differs: 'h200: torch 2.10.0 -> 2.11.0'."""
    out = []
    for device in sorted(set(before.device) & set(after.device)):
        b, a = _versions(before[before.device == device]), _versions(after[after.device == device])
        for name in FINGERPRINT:
            if b.get(name, "") != a.get(name, ""):
                out.append(f"{device}: {name} {b.get(name) or '(none)'} -> {a.get(name) or '(none)'}")
    return out


def _versions(rows) -> dict[str, str]:
    for _, r in rows.iterrows():
        if any(str(r.get(k) or "") for k in FINGERPRINT):
            return {k: str(r.get(k) or "") for k in FINGERPRINT}
    return {}


def exit_code(comparisons: list[Comparison], strict: bool) -> int:
    """1 on breaks and when nothing could be compared (a gate fails closed), and on risk with --strict; else 0."""
    verdicts = {c.verdict for c in comparisons}
    return 1 if verdicts & {BREAKS, NOTHING} or (strict and RISK in verdicts) else 0


# ---- outputs --------------------------------------------------------------------------------------------------

def to_json(comparisons: list[Comparison]) -> str:
    return json.dumps([dict(asdict(c), counts=c.counts()) for c in comparisons], indent=2, sort_keys=True)


TABLE_HEADERS = ("outcome", "device", "kernel", "workload", "dtype", "backend", "time after / before", "A/A", "why")


def summary(c: Comparison) -> str:
    """How the comparison was made, its runs, its counts and its thresholds (one line; `**` marks the warning)."""
    counts = ", ".join(f"{n} {k}" for k, n in sorted(c.counts().items()))
    how = ("paired: both toolchains timed in the same shuffled rounds, on the same device" if c.paired else
           f"**unpaired across hosts**: {c.hosts}" if c.hosts else
           "**unpaired**: two runs timed apart; drift between them is not cancelled, so this is weaker evidence "
           "than a paired run of a matrix with [[compare]]")
    return (f"{how}; runs {', '.join(c.runs) or '(this run)'}; {counts or 'no common rows'}; threshold "
            f"max({c.min_speedup:g}, 1 + {K_AA:g} x A/A noise), q < {Q_MAX:g} (Benjamini-Hochberg)")


def differs(c: Comparison) -> str:
    return "What differs: " + ("; ".join(c.fingerprint) if c.fingerprint else "no imported version differs")


def row_cells(r: RowChange) -> tuple:
    """One row of the comparison table (TABLE_HEADERS), for comparison.md and comparison.html alike."""
    aa = f"±{100 * r.aa_floor:.1f}%" if r.aa_floor is not None else "–"
    aa += f" (hosts ±{100 * r.host_floor:.1f}%)" if r.host_floor is not None else ""
    return (r.outcome, r.device, r.kernel, r.workload, r.dtype, r.label, r.ratio_text(), aa, "; ".join(r.why))


def markdown(comparisons: list[Comparison]) -> str:
    out = []
    for c in comparisons:
        out += [f"## {c.baseline} -> {c.candidate}: **{c.verdict}**", "", summary(c), "", differs(c), ""]
        out += [row(TABLE_HEADERS), row(["---"] * len(TABLE_HEADERS))]
        out += [row(row_cells(r)) for r in c.rows]
        out.append("")
    return "\n".join(out)


def junit_xml(comparisons: list[Comparison], strict: bool = False) -> str:
    """One test suite per comparison, one test case per row: `breaks` is a failure, `risk` too with --strict
    (otherwise it passes with the finding in its output), so a CI system shows each row. Texts go through
    core.text.visible: XML 1.0 has no place for a control character a compiler wrote."""
    suites = ET.Element("testsuites", name="opmatrix compare")
    for c in comparisons:
        suite = ET.SubElement(suites, "testsuite", name=f"{c.baseline} -> {c.candidate}", tests=str(len(c.rows)))
        failures = 0
        for r in c.rows:
            where = visible(f"{r.device}.{r.kernel}.{r.workload}.{r.dtype}")
            case = ET.SubElement(suite, "testcase", classname=where, name=visible(r.label))
            text = visible(f"{r.outcome}: {'; '.join(r.why) or 'no change'}; time after/before {r.ratio_text()}")
            if r.outcome == BREAKS or (strict and r.outcome == RISK):
                failures += 1
                ET.SubElement(case, "failure", type=r.outcome, message=text[:500]).text = text
            else:
                ET.SubElement(case, "system-out").text = text
        suite.set("failures", str(failures))
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)
