"""The adversarial suite: contestants that try to win by doing less work than they claim, or by reaching what the
judge keeps, in one CPU cell beside the honest baseline and an honest contestant, run as a user runs a matrix
(`opmatrix run M --no-ray`), one thread per worker as the toolchain pins it. Every one must end as a failed row
(`mismatch` or `suspect`), or, where the judge leaves its trick nothing to fire on, as an honest row that is no
faster than the honest copy; the verdict must never adopt any of them, and the honest rows must be timed with their
checks passed. Each test prints what caught the contestant.
"""
from __future__ import annotations

import pytest

from tests.adversarial import adversaries

pytestmark = pytest.mark.integration

MATRIX = """
name = "adversarial"
backends = {backends}
[run]
timeout_s = 90
trials = 3
warmup_ms = 0
rep_ms = 5
rounds = 10
max_rounds = 10
burst_ms = 15
burst_warmup_ms = 3
kernels_dir = "kernels"
backends_dir = "backends"
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
[[toolchain]]
name = "host"
system = true
env = {{ OMP_NUM_THREADS = "1" }}
[[kernel]]
name = "gemm_relu"
workloads = {{ cpu = ["square_384"] }}
dtypes = {{ cpu = ["float32"] }}
"""


@pytest.fixture(scope="module")
def run():
    with adversaries.matrix_run(MATRIX, adversaries.ADVERSARIES, "adversarial", timeout=600) as ran:
        yield ran


def test_the_run_completes_with_a_row_per_contestant(run):
    out, by_backend, verdicts = run
    assert out.returncode in (0, 1), out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    assert set(by_backend) == {"torch", "honest", *adversaries.ADVERSARIES}
    assert verdicts, "the run wrote no verdicts.json"


@pytest.mark.parametrize("backend", list(adversaries.ADVERSARIES))
def test_every_adversary_is_caught_and_never_adopted(run, backend):
    _, by_backend, verdicts = run
    row = by_backend[backend]
    allowed = adversaries.ADVERSARIES[backend][1]
    print(f"\n{backend}: {row['status']} in phase {row['phase']}: {row['error'][:300]}")
    assert row["status"] in allowed, (row["status"], row["phase"], row["error"][:500])
    if row["status"] == "ok":  # its trick never fired: it did all the work, every call checked like the others'
        honest = by_backend["honest"]
        assert row["timed_checks"] >= row["rounds"] and row["input_sets"] >= row["rounds"], row
        assert row["median_ms"] >= 0.8 * honest["median_ms"], (row["median_ms"], honest["median_ms"])
    for verdict in verdicts:
        assert verdict["choice"] != backend, verdict
        assert not any(c["label"] == backend and c["correct_everywhere"] and c["lo"] is not None
                       and c["lo"] > verdict["threshold"] for c in verdict["candidates"]), verdict


def test_a_contestant_that_clamps_its_inputs_is_caught_on_the_outlier_channels(run):
    """The spec declares two kinds of inputs: the correctness trials hold both, and every round's contents mix them
    in secret, so clamping after the trials is caught on a timed call too."""
    _, by_backend, _ = run
    trials, later = by_backend["clamps-inputs"], by_backend["clamps-after-8"]
    assert trials["phase"] == "correctness" and "kind 'outliers'" in trials["error"], trials["error"][:500]
    assert later["phase"] == "timing" and "kind 'outliers'" in later["error"], later["error"][:500]


def test_the_honest_contestants_are_timed_with_every_check_passed(run):
    _, by_backend, verdicts = run
    for backend in ("torch", "honest"):
        row = by_backend[backend]
        print(f"\n{backend}: {row['status']}, {row['rounds']} rounds, {row['input_sets']} calls on fresh contents, "
              f"{row['timed_checks']} checked (chance to see a tenth wrong: {row['catch_p10']}), judge "
              f"{row['judge_s']} s, {row['roofline_pct'] and round(row['roofline_pct'])} % of roofline")
        assert row["status"] == "ok", row["error"][:500]
        assert row["input_sets"] >= 2 * row["rounds"] and row["timed_checks"] >= 2 * row["rounds"]
        assert row["catch_p10"] > 0.99
        assert row["roofline_pct"] is not None and row["roofline_pct"] < 200
    (verdict,) = verdicts
    assert verdict["verdict"] in ("keep framework", "inconclusive"), verdict  # two honest copies of one kernel


def test_a_contestant_whose_builds_share_answers_through_a_file_is_caught():
    """Contestants of one round get the same contents (the pairing stays fair), so a contestant's own builds
    (`builds = 2`) can pass answers to each other outside the judge's sight. Each burst's call on contents no other
    worker is given shows it: that call is as slow as the work, the others are a file read."""
    # each build computes in the rounds where it goes first (half of them): 20 rounds show it in about 10
    matrix = MATRIX.replace("rounds = 10\nmax_rounds = 10", "rounds = 20\nmax_rounds = 20\nbuilds = 2")
    with adversaries.matrix_run(matrix, {"shares-answers": adversaries.SHARES_ANSWERS}, "shares", timeout=600) as ran:
        out, by_backend, verdicts = ran
        row = by_backend["shares-answers"]
        print(f"\nshares-answers: {row['status']} in phase {row['phase']}: {row['error'][:300]}")
        assert row["status"] == "suspect" and "no other" in row["error"], row["error"][:500]
        assert by_backend["honest"]["status"] == "ok", by_backend["honest"]["error"][:500]
        assert all(v["choice"] != "shares-answers" for v in verdicts)
