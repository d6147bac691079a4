"""Verdicts: per (kernel, device, toolchain), which implementation to ship, from the paired statistics.

- keep framework: no contestant is correct on every target workload and faster, with the lower bound of its
  geometric-mean interval above the threshold. The default answer.
- adopt <backend[variant]>: correct everywhere, and its geometric-mean speed-up interval lies above the threshold;
  among several, the one with the fewest lines of code of those tied with the fastest. Tied: its interval
  overlaps the fastest's, or the fastest is ahead of it by less than the threshold; a faster implementation must
  clear the same bar against another candidate as against the framework to be worth its extra code.
- gap: the framework does not run correctly on this device for every target workload: a separate implementation
  is needed (the rows that do cover it are named).
- inconclusive: a contestant's interval reaches past min_speedup but its lower bound is not clear of the threshold
  by more than EPSILON, even after the extra rounds: a worthwhile gain is neither shown nor ruled out (a verdict
  that would turn on a few tenths of a percent is not one to ship on).
- not run: no host had the device (compile-only coverage is shown as evidence instead).
- not judged: the framework was not measured here: the kernel's spec failed (rows in phase `spec`), or the
  baseline's own rows never ran (its package not installed, its environment broken, its host lost). Nothing about
  the device follows from it: no gap, and `opmatrix deployments` keeps the last run that measured it.
The threshold is max(acceptance.min_speedup, 1 + K_AA x the A/A noise floor), the floor read from the A/A twin of
each round group the verdict's rows were timed in (a resumed session's group has its own twin): the widest.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from opmatrix.core import status
from opmatrix.core.acceptance import Acceptance
from opmatrix.core.result import backend_label, backend_labels, split_backend_label
from opmatrix.decide import stats, trust
from opmatrix.store import frame_rows

K_AA = 2.0  # the smallest effect a verdict may claim is this many A/A half-widths
EPSILON = 0.005  # adopt only a lower bound more than this above the threshold (as a speed-up: 0.5 %)
Q_MAX = 0.05  # Benjamini-Hochberg level

# the columns verdicts read
READ = ["run_id", "cell", "kernel", "device", "toolchain", "workload", "dtype", "backend", "variant", "status", "phase",
        "error", "rel_err", "timer", *trust.READ[:-1], "compile_s", "config", "pairing", "round_group", "round_ms",
        "baseline_round_ms", "aa_round_ms", "build_round_ms", "speedup", "speedup_lo", "speedup_hi", "aa_lo", "aa_hi"]

KEEP, ADOPT, GAP, INCONCLUSIVE, NOT_RUN = "keep framework", "adopt", "gap", "inconclusive", "not run"
NOT_JUDGED = "not judged"
UNMEASURED = (status.ENV_ERROR, status.NOT_INSTALLED, status.LOST)  # a baseline row in these never ran on the device


@dataclass
class Candidate:
    label: str
    speedup: str = ""  # geometric mean "1.07x [1.05, 1.09]"
    worst: str = ""  # worst workload, its speed-up and interval
    geomean: float | None = None
    lo: float | None = None
    hi: float | None = None
    correct_everywhere: bool = True
    why_not: str = ""
    compile_s: float | None = None
    tuning_s: float | None = None
    lines_of_code: int | None = None
    portability: dict[str, str] = field(default_factory=dict)


@dataclass
class Verdict:
    kernel: str
    device: str
    toolchain: str
    verdict: str
    choice: str = ""  # the backend[variant] to ship
    reason: str = ""
    threshold: float | None = None
    aa_floor: str = ""  # the A/A noise floor: "±0.8%"
    workloads: list[str] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    options: list[str] = field(default_factory=list)  # Option A (fixed) vs Option B (autotuned)

    def headline(self) -> str:
        return f"{self.verdict} {self.choice}".strip()


def has_pairs(df) -> bool:
    """Verdicts need paired timing; a run timed one backend after another gets none."""
    return "pairing" in df.columns and bool((df.pairing.fillna("") != "").any())


def decide(df, acceptance: Acceptance, loc: dict[tuple[str, str], int] | None = None) -> list[Verdict]:
    """Verdicts for every (kernel, device, toolchain) of a run's rows (df from the store, with or without the
    paired columns of stats.add_paired_columns)."""
    if "speedup" not in df.columns:
        df = stats.add_paired_columns(df)
    df = df[[c for c in READ if c in df.columns]]  # every selection below copies each column it carries
    df = df.assign(label=backend_labels(df))  # each row's backend[variant], named once for every candidate
    loc = loc or {}
    ports = portability(df)
    verdicts = []
    for (kernel, device, toolchain), g in df.groupby(["kernel", "device", "toolchain"], sort=True):
        verdicts.append(_verdict(ports, g, kernel, device, toolchain, acceptance, loc))
    return verdicts


def portability(df) -> dict[tuple[str, str], dict[str, str]]:
    """(kernel, backend[variant]) -> {device: its rows' statuses there, "compile_error,ok"}, devices in order: what
    a candidate shows of itself on every device of the run (df with a label column, as decide makes it)."""
    out: dict[tuple[str, str], dict[str, str]] = {}
    for (kernel, label, device), statuses in df.groupby(["kernel", "label", "device"], sort=True).status:
        out.setdefault((kernel, label), {})[device] = ",".join(sorted(set(statuses)))
    return out


def _verdict(ports, g, kernel, device, toolchain, acceptance: Acceptance, loc) -> Verdict:
    baseline, min_speedup = acceptance.baseline, acceptance.min_speedup
    targets = sorted(set(zip(g.workload.tolist(), g.dtype.tolist())))
    v = Verdict(kernel, device, toolchain, NOT_RUN, workloads=[f"{w} {d}" for w, d in targets])
    ran = g[~g.status.isin([status.NO_HOST, *status.BUILD_ONLY])]
    if ran.empty or (g[g.backend == baseline].status == status.NO_HOST).all():
        return _not_run(v, g)  # no host had the device: at most compile-only builds for it
    unjudged = _not_judged(v, ran, baseline, targets)
    if unjudged is not None:
        return unjudged
    base = baseline_rows(ran, baseline)
    base_ok = {(w, d) for w, d, s in zip(base.workload.tolist(), base.dtype.tolist(), base.status.tolist())
               if s == status.OK}
    missing = [f"{w} {d}" for w, d in targets if (w, d) not in base_ok]
    v.aa_floor, v.threshold = _threshold(ran, min_speedup)
    v.candidates = [_candidate(ports, ran, kernel, label, targets, acceptance.max_rel_err, loc)
                    for label in _labels(ran, base)]
    if missing:
        unsafe = [f"{w} {d}" for w, d, s in zip(base.workload.tolist(), base.dtype.tolist(), base.status.tolist())
                  if s == status.UNSAFE]
        return _gap(v, baseline, missing, unsafe)
    _choose(v, baseline, min_speedup, len(targets))
    v.options = _options(ran)
    said, doubts = trust.caveats(ran)
    v.reason += "".join(f"; {text}" for text in said)
    if doubts:
        v.reason += "; not to be trusted as it stands: " + "; ".join(doubts)
    return v


def _not_judged(v: Verdict, ran, baseline: str, targets) -> Verdict | None:
    """The verdict when the framework was not measured on a target: the spec failed, or the baseline's rows never
    ran (UNMEASURED); None when every target's baseline ran (ok or not)."""
    phases = ran.phase if "phase" in ran.columns else None
    spec = ran[(phases == status.SPEC_PHASE).to_numpy()] if phases is not None else ran.iloc[:0]
    if len(spec):
        v.verdict = NOT_JUDGED
        v.reason = f"{spec.error.iloc[0]}: nothing here was judged; fix the spec and run again"
        return v
    base = ran[ran.backend == baseline]
    ran_on = {(w, d) for w, d, s in zip(base.workload.tolist(), base.dtype.tolist(), base.status.tolist())
              if s not in UNMEASURED}
    unmeasured = [(w, d) for w, d in targets if (w, d) not in ran_on]
    if not unmeasured:
        return None
    rows = base[base.status.isin(UNMEASURED)]
    why = (f"{rows.status.iloc[0]}: {str(rows.error.iloc[0]).splitlines()[0] if 'error' in rows else ''}"
           if len(rows) else "no row")
    v.verdict = NOT_JUDGED
    v.reason = (f"the baseline {baseline} was not measured on {', '.join(f'{w} {d}' for w, d in unmeasured)} "
                f"({why}): the environment, not the device; nothing here was judged")
    return v


def baseline_rows(ran, baseline: str):
    """The framework's rows: the baseline backend's row the others were paired with (no baseline rounds of its
    own); other variants of the baseline backend (torch[cudnn]) are contestants like any other."""
    rows = ran[ran.backend == baseline]
    paired_base = rows[(rows.pairing != "") & rows.baseline_round_ms.map(len).eq(0)]
    return paired_base if len(paired_base) else rows


def _not_run(v: Verdict, g) -> Verdict:
    """No host had the device: what was built for it, and what does not cover it (a separate implementation)."""
    v.reason = "no host had this device"
    for what, statuses in (("builds for it", status.BUILD_ONLY), ("unsupported there", (status.UNSUPPORTED,))):
        rows = g[g.status.isin(statuses)]
        labels = sorted({backend_label(b, x) for b, x in zip(rows.backend, rows.variant)})
        v.reason += f"; {what}: {', '.join(labels)}" if labels else ""
    return v


def _threshold(ran, min_speedup: float) -> tuple[str, float]:
    """(the A/A noise floor as text, the smallest speed-up a verdict may claim). Each round group's floor is read
    from its own twin (stats.twin_rows: the baseline's row, whose twin took part in every round; a group without
    one, such as a resumed session's, from its own row with the most rounds), never from another session's; the
    verdict takes the widest."""
    rows = frame_rows(ran)
    floors = [max(rows[i].aa_hi - 1, 1 - rows[i].aa_lo) for i in stats.twin_rows(rows).values()
              if rows[i].aa_hi == rows[i].aa_hi]
    if not floors:
        return "no A/A twin", min_speedup
    floor = float(max(floors))
    return f"±{100 * floor:.1f}%", max(min_speedup, 1 + K_AA * floor)


def _gap(v: Verdict, baseline: str, missing: list[str], unsafe: list[str] = ()) -> Verdict:
    covering = [c.label for c in v.candidates if c.correct_everywhere]
    v.verdict = GAP
    v.reason = (f"{baseline} is not ok here on {', '.join(missing)}: needs a separate implementation"
                + (f" ({baseline} is unsafe on {', '.join(unsafe)}: compute-sanitizer found a fault in its call)"
                   if unsafe else "")
                + (f"; correct here: {', '.join(covering)}" if covering else "; no backend of this run covers it"))
    return v


def _choose(v: Verdict, baseline: str, min_speedup: float, workloads: int) -> None:
    eligible = [c for c in v.candidates if c.correct_everywhere and c.lo is not None]
    adoptable = [c for c in eligible if c.lo > v.threshold + EPSILON]
    # Not claimable, yet a worthwhile gain is not ruled out: the interval reaches past min_speedup.
    open_ = [c for c in eligible if c.lo <= v.threshold + EPSILON and c.hi > min_speedup]
    if adoptable:
        best = max(adoptable, key=lambda c: c.geomean)
        tied = [c for c in adoptable if c.hi >= best.lo or best.geomean / c.geomean < v.threshold]
        choice = min(tied, key=lambda c: (c.lines_of_code or 10 ** 9, -c.geomean))
        v.verdict, v.choice = ADOPT, choice.label
        v.reason = (f"{choice.label}: {choice.speedup} over {baseline} (geometric mean over {workloads} "
                    f"workloads; worst {choice.worst}), above the threshold {_bar(v, min_speedup)}")
        if choice is not best:
            v.reason += (f"; chosen over {best.label} ({best.speedup}, ahead by less than the threshold) for "
                         f"fewer lines of code ({choice.lines_of_code} vs {best.lines_of_code})")
    elif open_:
        v.verdict = INCONCLUSIVE
        v.reason = "; ".join(f"{c.label} {c.speedup} reaches past min_speedup {min_speedup:g} but not clear of "
                             f"the threshold {_bar(v, min_speedup)}"
                             + (f" (its lower bound {c.lo:.3f} is within {EPSILON:g} of it)" if c.lo > v.threshold
                                else "") for c in open_)
    else:
        v.verdict, v.choice = KEEP, baseline
        fastest = max(eligible, key=lambda c: c.geomean, default=None)
        v.reason = (f"no contestant is correct on every workload and faster than {_bar(v, min_speedup)}"
                    + (f"; fastest: {fastest.label} {fastest.speedup}" if fastest else ""))


def _bar(v: Verdict, min_speedup: float) -> str:
    """The threshold, and where it is above min_speedup, that the A/A noise floor raised it."""
    text = f"{v.threshold:.3f}x"
    if v.threshold > min_speedup:
        text += f" (min_speedup {min_speedup:g} raised to 1 + {K_AA:g} x the A/A noise floor {v.aa_floor})"
    return text


def _labels(ran, base) -> list[str]:
    return sorted(set(ran.label.tolist()) - set(base.label.tolist()))


def _candidate(ports, ran, kernel, label, targets, max_rel_err, loc) -> Candidate:
    rows = ran[(ran.label == label).to_numpy()]
    c = Candidate(label)
    failing, build_sets, worst, timed = _measured(rows, targets, max_rel_err)
    c.correct_everywhere, c.why_not = not failing, "; ".join(failing)
    if not failing:
        per_workload = [stats.Interval(r.speedup, r.speedup_lo, r.speedup_hi) for r in timed]
        interval = stats.within_rows(stats.joined(stats.geomean_builds_interval(build_sets),
                                                  stats.geomean_of(per_workload)), per_workload)
        if interval:
            c.geomean, c.lo, c.hi, c.speedup = interval.estimate, interval.lo, interval.hi, interval.text()
        worst_text = stats.interval_text(worst.speedup, worst.speedup_lo, worst.speedup_hi)
        c.worst = f"{worst.workload} {worst.dtype} {worst_text}"
    c.compile_s = float(rows.compile_s.median()) if rows.compile_s.notna().any() else None
    c.tuning_s = _tuning_seconds(rows)
    backend = rows.backend.iloc[0] if len(rows) else split_backend_label(label)[0]
    c.lines_of_code = loc.get((kernel, backend))
    c.portability = dict(ports.get((kernel, label), {}))
    return c


def _measured(rows, targets, max_rel_err) -> tuple[list[str], list[list[list[float]]], object, list]:
    """(why it is not eligible per target, its per-round ratios per target and build, its slowest target's row,
    its timed rows)."""
    by_target = {(r.workload, r.dtype): r for r in frame_rows(rows)}
    failing, build_sets, worst, timed = [], [], None, []
    for w, d in targets:
        r = by_target.get((w, d))
        if r is None or r.status != status.OK:
            failing.append(f"{w} {d}: {r.status if r is not None else 'not run'}")
        elif max_rel_err is not None and r.rel_err == r.rel_err and r.rel_err > max_rel_err:
            failing.append(f"{w} {d}: rel_err {r.rel_err:.2g} > max_rel_err {max_rel_err:g}")
        elif r.timer == status.CORRECTNESS_ONLY:
            failing.append(f"{w} {d}: correctness only here (its timings would mean nothing)")
        elif not r.pairing or len((builds := stats.build_ratios(r))[0]) < 3:  # the first build's ratios
            failing.append(f"{w} {d}: not timed in rounds with the baseline")
        else:
            build_sets.append(builds)
            timed.append(r)
            worst = r if worst is None or r.speedup < worst.speedup else worst
    return failing, build_sets, worst, timed


def _tuning_records(rows) -> list[dict]:
    """The autotuner's records (opmatrix.kit.tune) in the rows' recorded configurations."""
    records = []
    for text in rows.config.dropna():
        try:
            tuning = json.loads(text).get("tuning")
        except (ValueError, AttributeError):
            continue
        if tuning:
            records.append(tuning)
    return records


def _tuning_seconds(rows) -> float | None:
    seconds = [t["seconds"][0] for t in _tuning_records(rows)]
    return float(sum(seconds) / len(seconds)) if seconds else None


def _options(ran) -> list[str]:
    """Option A (a fixed configuration: predictable, auditable) against Option B (autotuned: adaptive, costs
    tuning time): the tuned variant's paired ratio to the fixed one in the same rounds."""
    out = []
    for backend, g in ran[ran.status == status.OK].groupby("backend"):
        variants = set(g.variant)
        fixed = next((x for x in ("fixed", "tile") if x in variants), None)
        if "tuned" not in variants or fixed is None:
            continue
        sets = []
        for (w, d), pair in g.groupby(["workload", "dtype"]):
            a = pair[pair.variant == fixed]
            b = pair[pair.variant == "tuned"]
            if len(a) and len(b) and a.iloc[0].pairing and b.iloc[0].pairing:
                sets.append(_cross(a.iloc[0], b.iloc[0]))
        sets = [s for s in sets if len(s) >= 3]
        interval = stats.geomean_interval(sets) if sets else None
        held = _held(g[g.variant == "tuned"])
        out.append(f"{backend}: Option A `{fixed}` (fixed) vs Option B `tuned` (autotuned): tuned/fixed "
                   + (interval.text() if interval else "not paired") + f"; tuning choice held on re-tuning: {held}")
    return out


def _cross(fixed, tuned) -> list[float]:
    """fixed time / tuned time per round, over the rounds both were timed in (else no pairing)."""
    if not fixed.round_group or fixed.round_group != tuned.round_group:
        return []
    tuned_ms, fixed_ms = stats.shared_rounds(tuned, fixed)
    return stats.ratios(tuned_ms, fixed_ms)


def _held(rows) -> str:
    held = [bool(t.get("stable")) for t in _tuning_records(rows)]
    return f"{sum(held)}/{len(held)}" if held else "n/a"


JSON_DIGITS = 6  # significant digits of a number in verdicts.json: the intervals carry 2-3, and the last bits of a
# float differ between numpy/scipy builds (a geometric mean summed in another order), which must not change the file


def to_json(verdicts: list[Verdict]) -> str:
    return json.dumps(_rounded([asdict(v) for v in verdicts]), indent=1, sort_keys=True, default=str)


def _rounded(value):
    if isinstance(value, float):
        return float(f"{value:.{JSON_DIGITS}g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value
