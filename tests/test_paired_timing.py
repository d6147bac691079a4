"""Paired, interleaved timing through real worker processes: every contestant that passed its correctness check
is timed in shuffled rounds with the baseline (and its A/A twin) in every round; a contestant that dies during
the rounds costs only its own row."""
import pytest

from opmatrix import plan as plan_mod
from opmatrix.incell.cell_runner import run_cell
from opmatrix.matrix import load_matrix
from tests.conftest import probe_adapter, probe_matrix, write_plugins

SLEEPER = ("import time\n\ndef build(w, dtype, device, variant):\n"
           "    def fn(x, out):\n        time.sleep({seconds})\n        out.copy_(x * 2)\n    return fn\n")
DIES = ("import os, signal, time\ncalls = 0\n\ndef build(w, dtype, device, variant):\n"
        "    def fn(x, out):\n        global calls\n        calls += 1\n"
        "        if calls > 30:\n            os.kill(os.getpid(), signal.SIGKILL)\n"
        "        time.sleep(0.002)\n        out.copy_(x * 2)\n    return fn\n")
IMPLS = {"torch": SLEEPER.format(seconds=0.002), "same": SLEEPER.format(seconds=0.002),
         "slower": SLEEPER.format(seconds=0.0024), "dies": DIES}


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    root = tmp_path_factory.mktemp("paired")
    write_plugins(root, "probe", IMPLS, probe_adapter("wallclock"))
    probe_matrix(root, "paired", list(IMPLS), ["quick"], timeout_s=30, rep_ms=20)
    (plan,) = plan_mod.cell_plans(load_matrix(root / "m.toml"), "paired-run", root / "scratch")
    return {r.backend: r for r in run_cell(plan)}


def test_every_contestant_is_timed_in_the_same_rounds_as_the_baseline(rows):
    for name in ("torch", "same", "slower"):
        r = rows[name]
        assert r.status == "ok", r.error
        assert r.pairing == "interleaved" and r.rounds >= 10
        assert len(r.round_ms) == len(r.round_position) == r.rounds
        assert len(r.aa_round_ms) == r.rounds  # the baseline's A/A twin took part in every round
    assert rows["same"].baseline_round_ms == rows["torch"].round_ms
    assert rows["torch"].baseline_round_ms == []  # the baseline is not paired with itself


def test_round_order_is_shuffled(rows):
    positions = {tuple(rows[n].round_position) for n in ("torch", "same", "slower")}
    assert len({p for seq in positions for p in seq}) > 1 and len(positions) > 1


def test_a_contestant_that_dies_mid_round_costs_only_its_row(rows):
    r = rows["dies"]
    assert r.status == "crashed" and r.phase == "timing", (r.status, r.phase, r.error)
    assert "SIGKILL" in r.error and r.rel_err == 0.0  # what correctness found is kept
    assert rows["slower"].rounds == rows["torch"].rounds  # the others finished their rounds


def test_slower_contestant_is_slower_in_nearly_every_round(rows):
    r = rows["slower"]
    ratios = [b / m for b, m in zip(r.baseline_round_ms, r.round_ms)]
    assert sum(x < 1 for x in ratios) >= 0.8 * len(ratios)
