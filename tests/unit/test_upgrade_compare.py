"""Upgrade risk calibrated on synthetic runs whose truth is known: the candidate toolchain's rows are timed in the
same rounds as the baseline toolchain's (a drift factor per round, the power state of that moment, hits both),
and each burst has its own noise. A/A comparisons must come out safe; planted slowdowns, coverage and correctness
losses must be found."""
from xml.etree import ElementTree as ET

import numpy as np
import pytest

from opmatrix.core.result import Result
from opmatrix.store import frame
from opmatrix.upgrade import compare

ROUNDS, NOISE, DRIFT = 30, 0.02, 0.08
BACKENDS = ("torch", "triton", "tilelang")


def paired_run(seed: int, slowdown: dict | None = None, status: dict | None = None, rel_err: dict | None = None,
               compile_s: dict | None = None, workloads=("w1", "w2")) -> list[Result]:
    """Toolchain 'old' and candidate 'new' in the same rounds; slowdown: backend -> factor on new's time."""
    rng = np.random.default_rng(seed)
    slowdown, status, rel_err, compile_s = slowdown or {}, status or {}, rel_err or {}, compile_s or {}
    rows = []
    for w in workloads:
        drift = np.exp(rng.normal(0, DRIFT, ROUNDS))
        burst = lambda: drift * np.exp(rng.normal(0, NOISE, ROUNDS))  # noqa: E731
        base, twin = list(burst()), list(burst())
        for backend in BACKENDS:
            old = base if backend == "torch" else list(0.8 * burst())
            new = list((1.0 if backend == "torch" else 0.8) * burst() * slowdown.get(backend, 1.0))
            for toolchain, series in (("old", old), ("new", new)):
                state = status.get((toolchain, backend, w), "ok")
                rows.append(Result(
                    run_id="r", cell=f"h200.{toolchain}", device="h200", toolchain=toolchain, kernel="k", workload=w,
                    dtype="float16", backend=backend, variant="default", status=state, pairing="interleaved",
                    rel_err=rel_err.get((toolchain, backend), 1e-4), tolerance=1e-2,
                    compile_s=compile_s.get((toolchain, backend), 2.0), rounds=ROUNDS,
                    round_ms=series if state == "ok" else [], samples_ms=series if state == "ok" else [],
                    median_ms=float(np.median(series)), baseline_round_ms=[] if (toolchain, backend) ==
                    ("old", "torch") else base, aa_round_ms=twin,
                    peer_toolchain="old" if toolchain == "new" else "",
                    peer_round_ms=(base if backend == "torch" else old) if toolchain == "new" else [],
                    torch="2.11.0", triton="3.6.0", tilelang="0.1.14" if toolchain == "old" else "0.1.15"))
    return rows


def judged(results, **kw) -> compare.Comparison:
    df = frame(results)
    (pair,) = compare.declared_pairs([], df)  # an older run.json without [[compare]]: from the rows
    return compare.compare_paired(df, *pair, min_speedup=1.05, run_id="r", **kw)


@pytest.mark.slow  # 200 comparisons with bootstrap intervals: the whole suite, not the fast lane
def test_a_a_upgrades_are_safe_with_at_most_one_percent_false_alarms(record_property):
    seeds = range(200)
    alarms = sum(judged(paired_run(seed)).verdict != compare.SAFE for seed in seeds)
    rate = alarms / len(seeds)
    record_property("aa_false_alarm_rate", rate)
    print(f"A/A upgrade comparisons: {alarms} of {len(seeds)} not safe ({100 * rate:.1f} %)")
    assert rate <= 0.01


@pytest.mark.slow
@pytest.mark.parametrize("slowdown, must_find_all", [(1.03, False), (1.10, True), (1.30, True)])
def test_planted_slowdowns_are_found(slowdown, must_find_all, record_property):
    seeds = range(40)
    found = 0
    for seed in seeds:
        c = judged(paired_run(seed, slowdown={"triton": slowdown}))
        flagged = {(r.workload, r.label) for r in c.rows if r.outcome == compare.RISK}
        found += {("w1", "triton"), ("w2", "triton")} <= flagged
        assert not any(label != "triton" for _, label in flagged), flagged  # no innocent row flagged
    rate = found / len(seeds)
    record_property(f"detection_rate_{slowdown}", rate)
    print(f"planted {100 * (slowdown - 1):.0f} % slowdown: found on both workloads in {found} of {len(seeds)} runs")
    if must_find_all:
        assert rate == 1.0
    else:  # 3 % is under the 5 % threshold: reported as the same, by design (power 0 at min_speedup 1.05)
        assert rate == 0.0


def test_a_row_that_stops_running_breaks_the_upgrade_and_fails_ci():
    c = judged(paired_run(1, status={("new", "tilelang", "w2"): "compile_error"}))
    assert c.verdict == compare.BREAKS
    first = c.rows[0]
    assert (first.outcome, first.label, first.workload) == (compare.BREAKS, "tilelang", "w2")
    assert "ok -> compile_error" in first.why[0]
    assert compare.exit_code([c], strict=False) == 1


def test_a_correctness_loss_breaks_and_a_grown_error_is_a_risk():
    assert judged(paired_run(2, status={("new", "triton", "w1"): "mismatch"})).verdict == compare.BREAKS
    c = judged(paired_run(2, rel_err={("new", "triton"): 6e-3}))  # past half the tolerance (1e-2)
    risky = [r for r in c.rows if r.outcome == compare.RISK]
    assert c.verdict == compare.RISK and {r.label for r in risky} == {"triton"}
    assert "0.0001 -> 0.006" in risky[0].why[0]
    assert compare.exit_code([c], strict=False) == 0 and compare.exit_code([c], strict=True) == 1


def test_coverage_gained_is_an_improvement_not_a_risk():
    c = judged(paired_run(3, status={("old", "tilelang", "w1"): "unsupported"}))
    gained = [r for r in c.rows if r.outcome == compare.IMPROVED]
    assert c.verdict == compare.SAFE and [(r.label, r.workload) for r in gained] == [("tilelang", "w1")]


def test_much_slower_compiles_are_a_risk():
    c = judged(paired_run(4, compile_s={("new", "tilelang"): 30.0}))
    assert c.verdict == compare.RISK
    assert all("compile (and tuning) time 2 s -> 30 s" in r.why[-1] for r in c.rows if r.outcome == compare.RISK)


def test_fingerprint_names_what_changed():
    assert judged(paired_run(5)).fingerprint == ["h200: tilelang 0.1.14 -> 0.1.15"]


def test_junit_has_one_case_per_row_and_fails_only_what_breaks():
    c = judged(paired_run(6, status={("new", "triton", "w1"): "crashed"}, rel_err={("new", "tilelang"): 6e-3}))
    for strict, failing in ((False, {"breaks"}), (True, {"breaks", "risk"})):
        suite = ET.fromstring(compare.junit_xml([c], strict)).find("testsuite")
        cases = suite.findall("testcase")
        assert len(cases) == len(c.rows) == 6
        failed = {case.find("failure").get("type") for case in cases if case.find("failure") is not None}
        assert failed == failing and suite.get("failures") == str(sum(case.find("failure") is not None
                                                                     for case in cases))


def test_unpaired_runs_find_a_large_slowdown_and_say_they_are_weaker():
    rows = paired_run(7, slowdown={"triton": 1.30})
    old = frame([r for r in rows if r.toolchain == "old"])
    new = frame([r for r in rows if r.toolchain == "new"])
    c = compare.compare_unpaired(old, new, None, None, 1.05, ["run-a", "run-b"])
    assert not c.paired and "**unpaired**" in compare.markdown([c])
    assert {(r.label, r.outcome) for r in c.rows if r.outcome != compare.SAME} == {("triton", compare.RISK)}
    with pytest.raises(compare.CompareError, match="--baseline"):
        compare.compare_unpaired(frame(rows), new, None, None, 1.05, ["both", "run-b"])


def test_candidates_timed_in_other_rounds_than_their_peers_are_compared_through_the_baseline():
    """A resumed candidate (or one cut off by device memory) has no peer in its rounds: each side is taken
    against the baseline of its own rounds, so a session timed under another power state still compares, and a
    planted slowdown is found; the row says it is weaker."""
    rng = np.random.default_rng(11)
    rows = []
    for r in paired_run(3, slowdown={"triton": 1.30}):
        if r.toolchain == "new":  # another session: every time of it (and its baseline's) 15 % off, other noise
            shift = 1.15 * np.exp(rng.normal(0, NOISE, ROUNDS))
            r = Result(**{**r.__dict__, "peer_round_ms": [], "round_ms": list(np.asarray(r.round_ms) * shift),
                          "baseline_round_ms": list(np.asarray(r.baseline_round_ms) * shift),
                          "aa_round_ms": list(np.asarray(r.aa_round_ms) * shift)})
        rows.append(r)
    c = judged(rows)
    outcomes = {(r.workload, r.label): r for r in c.rows}
    assert {k for k, r in outcomes.items() if r.outcome != compare.SAME} == {("w1", "triton"), ("w2", "triton")}
    assert all(r.outcome == compare.RISK and 1.2 < r.time_ratio < 1.4 for k, r in outcomes.items() if k[1] == "triton")
    assert all("its own rounds" in " ".join(r.why) for r in c.rows)
    assert c.verdict == compare.RISK


def test_rows_that_ran_different_sources_of_their_implementation_are_not_compared():
    """A run resumed after an edit of kernels/k/triton.py: the candidate's triton rows (second session) ran other
    code than the baseline's (first session), so the planted slowdown is the edit's and is not judged; an
    implementation not edited, or edited before both sides ran, is compared as usual."""
    from opmatrix.manifest import RunManifest, Session

    rows = []
    for r in paired_run(5, slowdown={"triton": 1.30, "tilelang": 1.30}):
        late = r.toolchain == "new" and r.backend in ("triton", "tilelang")
        rows.append(Result(**{**r.__dict__, "started_at": "2026-11-30T14:00:00+00:00" if late else
                              "2026-11-30T12:00:00+00:00"}))
    manifest = RunManifest("r", sessions=[Session("2026-11-30T11:55:00+00:00", 12),
                                          Session("2026-11-30T13:55:00+00:00", 4, sources_changed=["k/triton"])])
    assert manifest.ran_other_code("k/triton", "2026-11-30T12:00:00+00:00", "2026-11-30T14:00:00+00:00")
    assert not manifest.ran_other_code("k/triton", "2026-11-30T14:00:00+00:00", "2026-11-30T14:01:00+00:00")
    assert not manifest.ran_other_code("k/tilelang", "2026-11-30T12:00:00+00:00", "2026-11-30T14:00:00+00:00")
    c = judged(rows, manifest=manifest)
    outcomes = {r.label: r for r in c.rows if r.workload == "w1"}
    assert outcomes["triton"].outcome == compare.UNCOMPARED and "different code" in outcomes["triton"].why[0]
    assert outcomes["tilelang"].outcome == compare.RISK  # not edited: its slowdown is the toolchain's
    unaware = {r.label: r for r in judged(rows).rows if r.workload == "w1"}  # no manifest: nothing known of edits
    assert unaware["triton"].outcome == compare.RISK


def test_nothing_run_on_either_side_is_not_safe_and_fails_the_gate():
    """A nightly whose cells could not import torch on both sides has no evidence: the gate fails closed."""
    broken = {(tc, b, w): "not_installed" for tc in ("old", "new") for b in BACKENDS for w in ("w1", "w2")}
    c = judged(paired_run(8, status=broken))
    assert c.verdict == compare.NOTHING and {r.outcome for r in c.rows} == {compare.UNCOMPARED}
    assert compare.exit_code([c], strict=False) == 1


def test_comparisons_declared_in_run_json_are_made_even_when_no_row_was_timed():
    df = frame(paired_run(9, status={("new", "triton", "w1"): "env_error"}))
    assert compare.declared_pairs([["old", "new"]], df) == [("old", "new")]
    assert compare.declared_pairs([], df) == [("old", "new")]  # older runs: from the candidate rows' peers


PROCESS, CLOCK = 0.01, 0.03  # sd of a worker process's own offset, and of a whole run's clock state


def stored_run(seed: int, slowdown: float = 1.0) -> list[Result]:
    """One run timed on its own (toolchain 'host'): a clock state for the whole run, a drift factor per round, an
    offset per worker process (the A/A twin is a process of its own) and noise per burst; triton slowed by
    `slowdown`."""
    rng = np.random.default_rng(seed)
    clock = np.exp(rng.normal(0, CLOCK))
    rows = []
    for w in ("w1", "w2"):
        drift = clock * np.exp(rng.normal(0, DRIFT, ROUNDS))
        burst = lambda: drift * np.exp(rng.normal(0, PROCESS) + rng.normal(0, NOISE, ROUNDS))  # noqa: E731
        base, twin = list(burst()), list(burst())
        for backend in BACKENDS:
            series = base if backend == "torch" else list(0.8 * burst() * (slowdown if backend == "triton" else 1))
            rows.append(Result(
                run_id=f"run-{seed}", cell="h200.host", device="h200", toolchain="host", kernel="k", workload=w,
                dtype="float16", backend=backend, variant="default", status="ok", pairing="interleaved",
                rel_err=1e-4, tolerance=1e-2, compile_s=2.0, rounds=ROUNDS, round_ms=series,
                samples_ms=[t * f for t in series for f in np.exp(rng.normal(0, NOISE, 10))],
                median_ms=float(np.median(series)), baseline_round_ms=[] if backend == "torch" else base,
                aa_round_ms=twin, torch="2.11.0", triton="3.6.0", tilelang="0.1.15"))
    return rows


def unpaired(seed: int, slowdown: float = 1.0) -> compare.Comparison:
    return compare.compare_unpaired(frame(stored_run(2 * seed)), frame(stored_run(2 * seed + 1, slowdown)), None,
                                    None, 1.05, ["a", "b"])


@pytest.mark.slow  # 200 unpaired comparisons with bootstrap intervals
def test_unpaired_runs_of_identical_code_come_out_the_same(record_property):
    """Two runs of the same code, each with its own clock state and worker processes: every row `same` in at least
    99 % of comparisons (the round, not the sample, is the unit; both runs' A/A floors set the threshold)."""
    seeds = range(200)
    moved = sum(any(r.outcome != compare.SAME for r in unpaired(seed).rows) for seed in seeds)
    record_property("unpaired_aa_not_same_rate", moved / len(seeds))
    print(f"unpaired A/A comparisons: {moved} of {len(seeds)} with a row not `same`")
    assert moved / len(seeds) <= 0.01


@pytest.mark.slow
def test_unpaired_runs_still_find_a_planted_30_percent_slowdown_and_count_rounds_not_samples():
    seeds = range(40)
    found = 0
    for seed in seeds:
        c = unpaired(seed, slowdown=1.30)
        found += {r.workload for r in c.rows if r.outcome == compare.RISK and r.label == "triton"} == {"w1", "w2"}
        assert not [r for r in c.rows if r.outcome != compare.SAME and r.label != "triton"]
    print(f"unpaired, planted 30 % slowdown: found on both workloads in {found} of {len(seeds)}")
    assert found / len(seeds) >= 0.95
    row = next(r for r in unpaired(0).rows if r.label == "triton")
    assert f"unpaired: {ROUNDS} and {ROUNDS} rounds as the unit" in " ".join(row.why)
    assert row.aa_floor is not None and row.threshold >= 1.05
