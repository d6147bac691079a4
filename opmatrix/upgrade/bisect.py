"""Bisection: the first version of a package at which a chosen (kernel, backend, workload, dtype) breaks, loses
correctness or slows beyond the threshold.

Each probe is a paired comparison, never two numbers from two moments: the good version's toolchain and the probed
version's, timed in the same rounds by one cell runner on one device, the good side with the framework baseline
and its A/A twin, judged row by row like a [[compare]] (opmatrix.upgrade.compare): `breaks` is bad, and a `risk`
of a watched kind (time and correctness by default; compile time when asked: a cold build's time is one sample per
side); `same`, `improved` and unwatched risks are good, `not compared` unknown. Running a probe is opmatrix.commands.bisect_probe's job; this
module decides which versions to probe and reports what was found.

The search: the bad end first (when it is not bad there is nothing to find, and the answer says so); then a binary
search between the last version known good and the first known bad, ceil(log2(n)) probes for n versions between
them; then the answer's two neighbours are probed again in fresh rounds (the last good version, and the version after
the first bad one), so that one noisy probe cannot name the wrong version unnoticed: a neighbour that disagrees makes
the answer `unconfirmed`. A probe that cannot judge stops the search with the range still open (`unknown`): unknown
means more runs, not a guess.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Callable
from xml.etree import ElementTree as ET

from opmatrix.mdtable import row
from opmatrix.upgrade import compare

GOOD, BAD, UNKNOWN = "good", "bad", "unknown"
FOUND, NONE_BAD, UNCONFIRMED, OPEN = "found", "no bad version", "unconfirmed", "unknown"
SEARCH, RECHECK = "search", "re-check"
WATCH = ("time", "correctness")  # the risks that make a version bad unless asked otherwise (compare.RISK_KINDS)
RESOLUTION = 0.5  # a probe must see a slowdown this large (its threshold at most 1 + this) to call a version good


@dataclass
class Probe:
    """One paired comparison: `version` against the good version, in the same rounds."""

    version: str
    verdict: str  # good / bad / unknown
    role: str = SEARCH  # search (the bad end and the binary search) or re-check (the answer's neighbours)
    outcome: str = ""  # the target row's outcome in the comparison: same, improved, risk, breaks, not compared
    why: list[str] = field(default_factory=list)
    status: str = ""  # the probed version's row status (ok, wrong, failed ...)
    time_ratio: float | None = None  # probed / good time: > 1 is slower
    time_lo: float | None = None
    time_hi: float | None = None
    threshold: float | None = None
    aa_floor: float | None = None
    run: str = ""  # the probe's run folder

    def ratio_text(self) -> str:
        if self.time_ratio is None:
            return "–"
        return f"{self.time_ratio:.3f}x [{self.time_lo:.3f}, {self.time_hi:.3f}]"


def judged(version: str, change: compare.RowChange | None, run: str, watch=WATCH,
           resolution: float = RESOLUTION) -> Probe:
    """A probe from the target row of its comparison (None: the row is missing from the run). With time watched, a
    version is good only when the probe could have seen a slowdown of `resolution`: a noise floor that puts the
    threshold beyond 1 + resolution judges nothing about speed (unknown: more rounds, or a quieter host)."""
    if change is None:
        return Probe(version, UNKNOWN, why=["the target row is not in the probe's run"], run=run)
    if change.status_before not in compare.COVERED:  # a reference that does not work judges nothing
        return Probe(version, UNKNOWN, outcome=change.outcome, status=change.status_after, run=run,
                     why=[f"the good version's own row is {change.status_before} in this probe, so it is no "
                          "reference: choose a good version that runs here"])
    verdict = {compare.BREAKS: BAD, compare.SAME: GOOD, compare.IMPROVED: GOOD}.get(change.outcome, UNKNOWN)
    if change.outcome == compare.RISK:
        verdict = BAD if set(change.risks) & set(watch) else GOOD
    why = list(change.why)
    if verdict == GOOD and "time" in watch and change.threshold is not None and change.threshold > 1 + resolution:
        verdict = UNKNOWN
        why.append(f"too noisy to judge speed: the threshold {change.threshold:.3g} (A/A floor "
                   f"±{100 * (change.aa_floor or 0):.1f}%) is above 1 + {resolution:g}, so a {100 * resolution:.0f} % "
                   "slowdown would pass unseen; more rounds ([run] rounds, noise_target) or a quieter host")
    return Probe(version, verdict, outcome=change.outcome, why=why, status=change.status_after,
                 time_ratio=change.time_ratio, time_lo=change.time_lo, time_hi=change.time_hi,
                 threshold=change.threshold, aa_floor=change.aa_floor, run=run)


@dataclass
class Bisection:
    package: str
    target: str  # "device kernel workload dtype backend[variant]"
    versions: list[str]  # good first, bad last
    verdict: str = OPEN  # found / no bad version / unconfirmed / unknown
    first_bad: str | None = None
    last_good: str | None = None
    probes: list[Probe] = field(default_factory=list)

    @property
    def good(self) -> str:
        return self.versions[0]

    @property
    def bad(self) -> str:
        return self.versions[-1]

    def search_probes(self) -> int:
        return sum(1 for p in self.probes if p.role == SEARCH)

    def summary(self) -> str:
        span = f"{self.package} {self.good} .. {self.bad} ({len(self.versions)} versions)"
        if self.verdict == NONE_BAD:
            return f"no version of {span} is bad for {self.target}: {self.bad} is as good as {self.good}"
        if self.verdict == OPEN:
            return (f"{span}: the search stopped with the first bad version between {self.last_good} and "
                    f"{self.first_bad}: a probe could not judge (see its row); run again")
        found = f"first bad version of {span} for {self.target}: {self.first_bad} (last good {self.last_good})"
        if self.verdict == UNCONFIRMED:
            return found + "; **unconfirmed**: a neighbour's re-check disagreed, so the boundary is noisy"
        return found


def bisect(package: str, target: str, versions: list[str], probe: Callable[[str, str], Probe]) -> Bisection:
    """Search `versions` (good first, bad last, in version order) with `probe(version, role)`."""
    result = Bisection(package, target, list(versions))

    def run(index: int, role: str = SEARCH) -> Probe:
        p = probe(versions[index], role)
        p.role = role
        result.probes.append(p)
        return p

    lo, hi = 0, len(versions) - 1
    end = run(hi)
    if end.verdict == GOOD:
        result.verdict, result.last_good = NONE_BAD, versions[hi]
        return result
    result.last_good, result.first_bad = versions[lo], versions[hi]
    if end.verdict == UNKNOWN:
        return result
    while hi - lo > 1:
        mid = (lo + hi) // 2
        p = run(mid)
        if p.verdict == UNKNOWN:
            result.last_good, result.first_bad = versions[lo], versions[hi]
            return result
        lo, hi = (mid, hi) if p.verdict == GOOD else (lo, mid)
    result.last_good, result.first_bad = versions[lo], versions[hi]
    rechecks = [run(i, RECHECK) for i in (lo, hi + 1) if 0 < i < len(versions)]
    expected = [GOOD if v == versions[lo] else BAD for v in (p.version for p in rechecks)]
    agree = all(p.verdict == want for p, want in zip(rechecks, expected))
    result.verdict = FOUND if agree else UNCONFIRMED
    return result


# ---- outputs --------------------------------------------------------------------------------------------------

HEADERS = ("#", "version", "probe", "verdict", "row", "time probed / good", "threshold", "A/A", "why")


def markdown(b: Bisection) -> str:
    title = f"## bisect {b.package} {b.good} -> {b.bad}: **{b.first_bad if b.verdict == FOUND else b.verdict}**"
    out = [title, "", b.summary() + ".", "",
           f"Each probe: the version against {b.good}, paired in the same rounds on one device (like [[compare]]); "
           f"{b.search_probes()} search probe(s), {len(b.probes) - b.search_probes()} re-check(s). "
           f"Versions: {', '.join(b.versions)}.", ""]
    out += [row(HEADERS), row(["---"] * len(HEADERS))]
    for i, p in enumerate(b.probes, 1):
        aa = f"±{100 * p.aa_floor:.1f}%" if p.aa_floor is not None else "–"
        threshold = f"{p.threshold:.3f}" if p.threshold is not None else "–"
        out.append(row((str(i), p.version, p.role, p.verdict, p.outcome or p.status or "–", p.ratio_text(), threshold,
                        aa, "; ".join(p.why))))
    return "\n".join(out) + "\n"


def to_json(b: Bisection) -> str:
    return json.dumps(dict(asdict(b), search_probes=b.search_probes(), summary=b.summary()), indent=2,
                      sort_keys=True)


def junit_xml(b: Bisection) -> str:
    """One test case per probe: a bad version is a failure (its row's outcome and why), so a CI system lists the
    versions that fail; the suite's name carries the answer."""
    suites = ET.Element("testsuites", name="opmatrix bisect")
    suite = ET.SubElement(suites, "testsuite", name=f"bisect {b.package} {b.good} -> {b.bad}: {b.summary()}",
                          tests=str(len(b.probes)))
    failures = 0
    for i, p in enumerate(b.probes, 1):
        case = ET.SubElement(suite, "testcase", classname=f"{b.target}", name=f"{i:02d} {b.package}=={p.version} "
                             f"({p.role})")
        text = f"{p.verdict} ({p.outcome or p.status or 'no row'}): {'; '.join(p.why) or 'no change'}; time " \
               f"probed/good {p.ratio_text()}"
        if p.verdict == BAD:
            failures += 1
            ET.SubElement(case, "failure", type=p.outcome or BAD, message=text[:500]).text = text
        else:
            ET.SubElement(case, "system-out").text = text
    suite.set("failures", str(failures))
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)


def exit_code(b: Bisection) -> int:
    """0 when no version is bad; 1 when one is (a regression lies in the range) or the search could not finish."""
    return 0 if b.verdict == NONE_BAD else 1
