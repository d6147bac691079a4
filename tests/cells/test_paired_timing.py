"""Paired, interleaved timing through real worker processes: every contestant that passed its correctness check
is timed in shuffled rounds with the baseline (and its A/A twin) in every round; a contestant that dies during
the rounds costs only its own row."""
import re

import numpy as np
import pytest

from opmatrix import plan as plan_mod
from opmatrix.incell.cell_runner import run_cell
from opmatrix.matrix import load_matrix
from tests.helpers import probe_adapter, probe_matrix, write_plugins

pytestmark = pytest.mark.integration

SLEEPER = ("import time\n\ndef build(w, dtype, device, variant):\n"
           "    def fn(x, out):\n        time.sleep({seconds})\n        out.copy_(x * 2)\n    return fn\n")
DIES = ("import os, signal, time\ncalls = 0\n\ndef build(w, dtype, device, variant):\n"
        "    def fn(x, out):\n        global calls\n        calls += 1\n"
        "        if calls > 30:\n            os.kill(os.getpid(), signal.SIGKILL)\n"
        "        time.sleep(0.002)\n        out.copy_(x * 2)\n    return fn\n")
IMPLS = {"torch": SLEEPER.format(seconds=0.002), "same": SLEEPER.format(seconds=0.002),
         "slower": SLEEPER.format(seconds=0.0024), "dies": DIES}


def ten_rounds(matrix):
    """max_rounds = 10 in the matrix (the least the schema allows): for the tests that read no extra round. On a
    loaded machine an interval near the threshold (`same` is the baseline's own code) could otherwise ask for up to
    30 rounds; the tests of extra rounds (test_a_contestant_whose_interval_cleared_...) set their own."""
    matrix.write_text(matrix.read_text().replace("[run]", "[run]\nrounds = 10\nmax_rounds = 10"))
    return matrix


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    root = tmp_path_factory.mktemp("paired")
    write_plugins(root, "probe", IMPLS, probe_adapter("wallclock"))
    ten_rounds(probe_matrix(root, "paired", list(IMPLS), ["quick"], timeout_s=30, rep_ms=20))
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


def test_rows_say_what_their_rounds_cost(rows):
    """Each round holds at least a burst of 20 ms of every live contestant (the baseline and its twin too)."""
    assert rows["same"].rounds_s == rows["torch"].rounds_s  # the same rounds
    assert rows["same"].rounds_s >= rows["same"].rounds * 4 * 0.020


def test_round_order_is_shuffled(rows):
    positions = {tuple(rows[n].round_position) for n in ("torch", "same", "slower")}
    assert len({p for seq in positions for p in seq}) > 1 and len(positions) > 1


def test_a_contestant_that_dies_mid_round_costs_only_its_row(rows):
    r = rows["dies"]
    assert r.status == "crashed" and r.phase == "timing", (r.status, r.phase, r.error)
    assert "SIGKILL" in r.error and r.rel_err == 0.0  # what correctness found is kept
    # the others finished their rounds: at least the minimum (a contestant whose interval clears the threshold
    # leaves the extra rounds before the baseline does, so it may hold fewer than the baseline)
    assert rows["slower"].status == "ok" and 10 <= rows["slower"].rounds <= rows["torch"].rounds


def test_slower_contestant_is_slower_in_nearly_every_round(rows):
    r = rows["slower"]
    ratios = [b / m for b, m in zip(r.baseline_round_ms, r.round_ms)]
    assert sum(x < 1 for x in ratios) >= 0.8 * len(ratios)


def test_run_writes_verdicts_gates_on_failures_and_feeds_deployments(tmp_path, capsys):
    """The whole path through a real nox cell: paired rows -> verdicts.json and a Verdicts section -> exit 1 for
    the crashed row (or 0 when --fail-on leaves crashed out) -> `opmatrix deployments`."""
    import json

    from opmatrix import cli

    write_plugins(tmp_path, "probe", IMPLS, probe_adapter("wallclock"))
    # extra rounds kept (no ten_rounds): the verdict reads slower's interval, hi < 1.0, which they may narrow
    matrix = probe_matrix(tmp_path, "gate", list(IMPLS), ["quick"], timeout_s=30, rep_ms=20)
    common = ["--no-ray", "--reports", str(tmp_path / "reports")]
    assert cli.main(["run", str(matrix), "--run-id", "gate", *common]) == 1
    printed = capsys.readouterr()
    assert "1 row(s) failed (crashed 1)" in printed.err
    # between rows, what the cell is doing: the group's builds, then its rounds so far (from inside the nox cell)
    assert "cpu.host: probe quick float32: building and checking 4 contestant(s)" in printed.out
    assert re.search(r"cpu\.host: probe quick float32: 10 rounds in \d+ s, now of \d of \d timing servers \(at least 10",
                     printed.out)
    verdicts = json.loads((tmp_path / "reports" / "gate" / "verdicts.json").read_text())
    (v,) = verdicts
    assert v["verdict"] == "keep framework" and v["choice"] == "torch"
    slower = next(c for c in v["candidates"] if c["label"] == "slower")
    assert slower["hi"] < 1.0  # found slower, with its interval
    recorded = json.loads((tmp_path / "reports" / "gate" / "run.json").read_text())["lines_of_code"]
    assert recorded["probe/slower"] == slower["lines_of_code"] > 0  # the effort the verdict weighs, kept in run.json
    report = (tmp_path / "reports" / "gate" / "report.md").read_text()
    assert report.index("## Verdicts") < report.index("## Environments")
    assert cli.main(["deployments", "gate", "--reports", str(tmp_path / "reports"), "--json"]) == 0
    (d,) = json.loads(capsys.readouterr().out)
    assert d["support"] == "supported" and d["use"] == "torch" and d["run_id"] == "gate"


HOG = ("import fcntl, time\nheld = []\n\ndef build(w, dtype, device, variant):\n"
       "    fh = open({lock!r}, 'w')\n    fcntl.flock(fh, fcntl.LOCK_EX)\n    held.append(fh)  # 'device memory' while alive\n"
       "    def fn(x, out):\n        time.sleep(0.002)\n        out.copy_(x * 2)\n    return fn\n")
BIG = ("import fcntl, time\n\ndef build(w, dtype, device, variant):\n"
       "    fh = open({lock!r}, 'w')\n    try:\n        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
       "    except BlockingIOError:\n        raise RuntimeError('CUDA out of memory (simulated: hog holds the device)')\n"
       "    def fn(x, out):\n        time.sleep(0.002)\n        out.copy_(x * 2)\n    return fn\n")


def test_contestants_that_do_not_fit_together_are_timed_in_blocks_with_the_baseline(tmp_path):
    """`big` runs out of memory beside `hog`: hog's block is timed first, then big beside only the baseline and
    its twin; both rows are paired with the baseline in their own rounds, and say which block they were in."""
    lock = str(tmp_path / "device.lock")
    impls = {"torch": SLEEPER.format(seconds=0.002), "hog": HOG.format(lock=lock), "big": BIG.format(lock=lock)}
    write_plugins(tmp_path, "probe", impls, probe_adapter("wallclock"))
    ten_rounds(probe_matrix(tmp_path, "blocks", list(impls), ["quick"], timeout_s=30, rep_ms=20))
    (plan,) = plan_mod.cell_plans(load_matrix(tmp_path / "m.toml"), "blocks", tmp_path / "scratch")
    rows = {r.backend: r for r in run_cell(plan)}
    assert {r.status for r in rows.values()} == {"ok"}, {n: r.error for n, r in rows.items()}
    assert rows["hog"].pairing == "interleaved" and rows["big"].pairing.startswith("interleaved, block 2")
    base = rows["torch"]
    assert base.rounds == rows["hog"].rounds + rows["big"].rounds  # the baseline was in every round of both
    assert rows["big"].baseline_round_ms == base.round_ms[rows["hog"].rounds:]
    assert rows["hog"].round_group != rows["big"].round_group  # never paired with each other directly
    assert set(base.round_group.split("+")) == {rows["hog"].round_group, rows["big"].round_group}
    # both blocks' rounds (each row keeps its seconds to 3 decimals: the sum may be off by 1 ms per term)
    assert base.rounds_s == pytest.approx(rows["hog"].rounds_s + rows["big"].rounds_s, abs=0.002)


def test_a_resumed_contestant_is_paired_with_its_baseline_again(tmp_path):
    """--resume of a group whose baseline already has its row: the baseline runs again as a partner, so the
    resumed contestant is timed in rounds with it; no second baseline row is stored."""
    from opmatrix.run import remaining
    from opmatrix.core.result import Result

    write_plugins(tmp_path, "probe", {"torch": IMPLS["torch"], "slower": IMPLS["slower"]}, probe_adapter("wallclock"))
    ten_rounds(probe_matrix(tmp_path, "partner", ["torch", "slower"], ["quick"], timeout_s=30, rep_ms=20))
    (plan,) = plan_mod.cell_plans(load_matrix(tmp_path / "m.toml"), "partner", tmp_path / "scratch")
    stored = [Result(run_id="partner", cell="cpu.host", device="cpu", kernel="probe", workload="quick",
                     dtype="float32", backend="torch", status="ok")]
    (left,) = remaining([plan], stored, {"lost"})
    assert [j.backend for j in left.jobs] == ["slower"] and [j.backend for j in left.partners] == ["torch"]
    rows = list(run_cell(left))
    assert [r.backend for r in rows] == ["slower"]
    assert rows[0].status == "ok" and len(rows[0].baseline_round_ms) == rows[0].rounds >= 10



VARIANTS_FIRST_SLOW = ("import time\nVARIANTS = ('slow', 'default')\n\ndef build(w, dtype, device, variant):\n"
                       "    seconds = 0.004 if variant == 'slow' else 0.002\n"
                       "    def fn(x, out):\n        time.sleep(seconds)\n        out.copy_(x * 2)\n    return fn\n")


def test_the_baseline_is_the_default_variant_of_its_backend_fresh_and_resumed(tmp_path):
    """The baseline backend's other variants (torch[math]) are contestants: paired with its default variant, also
    when it is listed first and when only it is resumed (it was once timed as the group's baseline then)."""
    from opmatrix.core.result import Result
    from opmatrix.run import remaining

    write_plugins(tmp_path, "probe", {"torch": VARIANTS_FIRST_SLOW}, probe_adapter("wallclock"))
    ten_rounds(probe_matrix(tmp_path, "variants", ["torch"], ["quick"], timeout_s=30, rep_ms=20))
    (plan,) = plan_mod.cell_plans(load_matrix(tmp_path / "m.toml"), "variants", tmp_path / "scratch")
    assert [j.variant for j in plan.jobs] == ["slow", "default"]
    rows = {r.variant: r for r in run_cell(plan)}
    assert rows["default"].baseline_round_ms == [] and len(rows["default"].aa_round_ms) == rows["default"].rounds
    assert rows["slow"].baseline_round_ms == rows["default"].round_ms[:rows["slow"].rounds]
    stored = [Result(run_id="variants", cell="cpu.host", device="cpu", kernel="probe", workload="quick",
                     dtype="float32", backend="torch", variant="default", status="ok")]
    (left,) = remaining([plan], stored, {"lost"})
    assert [j.variant for j in left.jobs] == ["slow"] and [j.variant for j in left.partners] == ["default"]
    (slow,) = run_cell(left)
    assert slow.variant == "slow" and slow.status == "ok" and len(slow.baseline_round_ms) == slow.rounds >= 10
    assert max(a / b for a, b in zip(slow.baseline_round_ms, slow.round_ms)) < 1  # slower than its baseline

SLOT = ("import fcntl, time\nheld = []\n\ndef build(w, dtype, device, variant):\n"
        "    for i in range({slots}):  # 'device memory': a slot file locked while the worker lives\n"
        "        fh = open({folder!r} + f'/slot{{i}}', 'w')\n"
        "        try:\n            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "        except BlockingIOError:\n            fh.close()\n            continue\n"
        "        held.append(fh)\n        break\n"
        "    else:\n        raise RuntimeError('CUDA out of memory (simulated: every slot is held)')\n"
        "    def fn(x, out):\n        time.sleep(0.002)\n        out.copy_(x * 2)\n    return fn\n")


def test_a_toolchain_pair_cut_by_device_memory_is_timed_together_in_the_next_block(tmp_path):
    """[[compare]] of two toolchains, each with contestants x and y; the device holds three of them besides the
    baseline. Both toolchains' x fit with one y: the y that does not fit takes its peer along into the next block,
    so every candidate row is paired with its peer in the same rounds (not 'not compared' in `opmatrix compare`)."""
    import dataclasses
    import sys

    slots = tmp_path / "slots"
    slots.mkdir()
    impls = {"torch": SLEEPER.format(seconds=0.002), "x": SLOT.format(slots=3, folder=str(slots)),
             "y": SLOT.format(slots=3, folder=str(slots))}
    write_plugins(tmp_path, "probe", impls, probe_adapter("wallclock"))
    matrix = probe_matrix(tmp_path, "pairs", list(impls), ["quick"], timeout_s=30, rep_ms=20)
    text = matrix.read_text().replace('name = "host"\nsystem = true', 'name = "old"\nsystem = true\n'
                                      '[[toolchain]]\nname = "new"\nsystem = true\n'
                                      '[[compare]]\nbaseline = "old"\ncandidate = "new"')
    matrix.write_text(text.replace("[run]", "[run]\nrounds = 10\nmax_rounds = 10"))
    (plan,) = plan_mod.cell_plans(load_matrix(matrix), "pairs", tmp_path / "scratch")
    plan = plan.replace(rival=dataclasses.replace(plan.rival, python=sys.executable))
    rows = {(r.toolchain, r.backend): r for r in run_cell(plan)}
    assert {r.status for r in rows.values()} == {"ok"}, {k: r.error for k, r in rows.items()}
    assert rows[("old", "y")].pairing.startswith("interleaved, block 2")  # the cut happened
    for name in ("torch", "x", "y"):
        new, old = rows[("new", name)], rows[("old", name)]
        assert new.peer_toolchain == "old" and new.round_group in old.round_group.split("+"), name
        assert len(new.peer_round_ms) == len(new.round_ms) == new.rounds >= 10, name


BUILD_ORDER = ("import os, time\n\ndef build(w, dtype, device, variant):\n"
               "    n = len(os.listdir({folder!r})) + 1  # builds start one after another: this is build n\n"
               "    open(os.path.join({folder!r}, str(n)), 'w').close()\n"
               "    if n > {fails_after}:\n        raise RuntimeError(f'build {{n}} went wrong')\n"
               "    seconds = {seconds}[n - 1]\n"
               "    def fn(x, out):\n        time.sleep(seconds)\n        out.copy_(x * 2)\n    return fn\n")


def test_builds_are_independent_workers_timed_in_the_same_rounds_and_widen_the_interval(tmp_path):
    """[run] builds = 2: every contestant but the baseline is built twice, each build in its own worker, and both
    are timed in the same rounds. `varies` is 30 % slower in its second build (what an autotuner's choice or
    generated code can do between two builds): its row holds both builds' rounds, and its interval covers both
    builds' speed-ups, where one build's rounds alone would exclude the other's. A second build that fails fails
    the row, saying which build."""
    from opmatrix.decide import stats
    from opmatrix.store import add_speedup, frame

    folders = {name: tmp_path / name for name in ("varies", "flaky")}
    for folder in folders.values():
        folder.mkdir()
    impls = {"torch": SLEEPER.format(seconds=0.002),
             "varies": BUILD_ORDER.format(folder=str(folders["varies"]), fails_after=9, seconds=[0.002, 0.0026]),
             "flaky": BUILD_ORDER.format(folder=str(folders["flaky"]), fails_after=1, seconds=[0.002])}
    write_plugins(tmp_path, "probe", impls, probe_adapter("wallclock"))
    matrix = probe_matrix(tmp_path, "builds", list(impls), ["quick"], timeout_s=30, rep_ms=20)
    matrix.write_text(matrix.read_text().replace("[run]", "[run]\nbuilds = 2\nrounds = 10\nmax_rounds = 10"))
    (plan,) = plan_mod.cell_plans(load_matrix(matrix), "builds", tmp_path / "scratch")
    results = list(run_cell(plan))
    rows = {r.backend: r for r in results}
    assert rows["flaky"].status == "compile_error" and rows["flaky"].error.startswith("build 2 of 2: "), \
        (rows["flaky"].status, rows["flaky"].error)
    base, varies = rows["torch"], rows["varies"]
    assert base.status == varies.status == "ok", (base.error, varies.error)
    assert base.build_round_ms == [] and len(base.aa_round_ms) == base.rounds  # the baseline: itself and its twin
    assert len(varies.build_round_ms) == len(varies.round_ms) == varies.rounds == 10
    assert sorted(p.name for p in folders["varies"].iterdir()) == ["1", "2"]  # two builds, two processes
    assert [p.name for p in (tmp_path / "scratch").rglob("*-build2")]  # the second build's own job folder
    first, second = stats.build_ratios(varies)
    assert stats.median_interval(second).hi < stats.median_interval(first).lo  # the builds do differ
    df = stats.add_paired_columns(add_speedup(frame(results), "torch")).set_index("backend")
    lo, hi = df.loc["varies", "speedup_lo"], df.loc["varies", "speedup_hi"]
    assert lo <= float(np.median(second)) and float(np.median(first)) <= hi, (lo, hi)


def test_a_further_build_that_does_not_fit_is_left_out_and_the_row_says_so(tmp_path):
    """builds = 2, and the device holds one `x` worker: x's second build runs out of memory beside the first. The
    row keeps the first build's rounds (no interval over builds) and says which build was left out and why."""
    slots = tmp_path / "slots"
    slots.mkdir()
    impls = {"torch": SLEEPER.format(seconds=0.002), "x": SLOT.format(slots=1, folder=str(slots))}
    write_plugins(tmp_path, "probe", impls, probe_adapter("wallclock"))
    matrix = probe_matrix(tmp_path, "fit", list(impls), ["quick"], timeout_s=30, rep_ms=20)
    matrix.write_text(matrix.read_text().replace("[run]", "[run]\nbuilds = 2\nrounds = 10\nmax_rounds = 10"))
    (plan,) = plan_mod.cell_plans(load_matrix(matrix), "fit", tmp_path / "scratch")
    rows = {r.backend: r for r in run_cell(plan)}
    x = rows["x"]
    assert x.status == "ok" and x.rounds == 10 and x.build_round_ms == [], (x.status, x.error)
    assert "build 2 of 2 left out: out of device memory beside the others" in x.timing_notes


SPIKE = ("import fcntl, time\ncalls = 0\n\ndef build(w, dtype, device, variant):\n"
         "    def fn(x, out):  # a large transient on every call: 'device memory' only while hog is not alive\n"
         "        global calls\n        calls += 1\n"
         "        with open({lock!r}, 'w') as fh:\n"
         "            try:\n                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
         "            except BlockingIOError:\n"
         "                if calls > 20:  # past the correctness check's calls: in the rounds\n"
         "                    raise RuntimeError('CUDA out of memory (simulated: hog holds the device)')\n"
         "        time.sleep(0.002)\n        out.copy_(x * 2)\n    return fn\n")


def test_a_contestant_out_of_memory_in_the_rounds_is_timed_again_in_the_next_block(tmp_path):
    """`spike` passes its check, then runs out of memory in the rounds beside `hog`: it is not stored as a
    failure but started again after hog's block, timed in block 2 beside the baseline, and its row says why."""
    lock = str(tmp_path / "device.lock")
    impls = {"torch": SLEEPER.format(seconds=0.002), "hog": HOG.format(lock=lock), "spike": SPIKE.format(lock=lock)}
    write_plugins(tmp_path, "probe", impls, probe_adapter("wallclock"))
    matrix = probe_matrix(tmp_path, "spike", list(impls), ["quick"], timeout_s=30, rep_ms=20)
    matrix.write_text(matrix.read_text().replace("[run]", "[run]\nrounds = 10\nmax_rounds = 10"))
    (plan,) = plan_mod.cell_plans(load_matrix(matrix), "spike", tmp_path / "scratch")
    rows = {r.backend: r for r in run_cell(plan)}
    assert sorted(rows) == ["hog", "spike", "torch"]  # one row each: the first attempt left no row
    spike, hog, base = rows["spike"], rows["hog"], rows["torch"]
    assert spike.status == hog.status == "ok", (spike.status, spike.error)
    assert spike.pairing.startswith("interleaved, block 2") and spike.rounds == 10
    assert re.search(r"out of device memory in round \d+ beside 3 other timing servers: started again and timed "
                     r"in block 2", spike.timing_notes), spike.timing_notes
    assert spike.baseline_round_ms == base.round_ms[-10:] and hog.rounds == 10


def test_an_out_of_memory_in_the_rounds_with_nothing_to_wait_for_is_an_oom_row(tmp_path):
    """The same contestant, out of memory again in its second block: its row is `oom` (never runtime_error),
    with the allocator's message."""
    lock = str(tmp_path / "device.lock")
    held = open(lock, "w")
    import fcntl
    fcntl.flock(held, fcntl.LOCK_EX)  # held by the test: no block ever has room
    impls = {"torch": SLEEPER.format(seconds=0.002), "spike": SPIKE.format(lock=lock)}
    write_plugins(tmp_path, "probe", impls, probe_adapter("wallclock"))
    matrix = ten_rounds(probe_matrix(tmp_path, "full", list(impls), ["quick"], timeout_s=30, rep_ms=20))
    (plan,) = plan_mod.cell_plans(load_matrix(matrix), "full", tmp_path / "scratch")
    rows = {r.backend: r for r in run_cell(plan)}
    held.close()
    spike = rows["spike"]
    assert spike.status == "oom" and spike.phase == "timing", (spike.status, spike.error)
    assert "CUDA out of memory (simulated" in spike.error and rows["torch"].status == "ok"


def test_a_contestant_whose_interval_cleared_the_threshold_leaves_the_extra_rounds(tmp_path):
    """Without a rival toolchain the extra rounds visit only the baseline, its twin and the undecided: `far`, 5x
    slower, is decided after the 10 rounds every contestant takes and leaves (5x: a loaded machine's scheduling
    delays, milliseconds, cannot make its interval straddle the threshold); the A/A noise (a target no sleep can
    meet) keeps the baseline and its twin going to max_rounds. Its row holds its 10 rounds, paired with the
    baseline's first 10, says why it has fewer, and cost less time; the two rows still pair on their shared rounds.
    Before, every live contestant went on to max_rounds with the baseline (far would have 25 rounds)."""
    from opmatrix.decide import stats
    from opmatrix.store import add_speedup, frame

    impls = {"torch": SLEEPER.format(seconds=0.002), "far": SLEEPER.format(seconds=0.010)}
    write_plugins(tmp_path, "probe", impls, probe_adapter("wallclock"))
    matrix = probe_matrix(tmp_path, "settle", list(impls), ["quick"], timeout_s=30, rep_ms=20)
    matrix.write_text(matrix.read_text().replace(
        "[run]", "[run]\nrounds = 10\nmax_rounds = 25\nnoise_target = 0.0001\nround_extra_s = 60"))
    (plan,) = plan_mod.cell_plans(load_matrix(matrix), "settle", tmp_path / "scratch")
    assert plan.rival is None and plan.settings.noise_target == 0.0001
    results = list(run_cell(plan))
    rows = {r.backend: r for r in results}
    base, far = rows["torch"], rows["far"]
    assert base.status == far.status == "ok", (base.error, far.error)
    assert base.rounds == len(base.round_ms) == len(base.aa_round_ms) == 25  # the A/A noise asked for every round
    assert "extra rounds went on without it" not in base.timing_notes
    assert far.rounds == len(far.round_ms) == len(far.round_position) == 10
    assert far.baseline_round_ms == base.round_ms[:10] and len(far.aa_round_ms) == 10
    assert far.aa_round_ms == base.aa_round_ms[:10]  # the twin's medians of the same first 10 rounds
    assert "timed in 10 rounds: its interval then cleared the threshold and the extra rounds went on without it" \
        in far.timing_notes, far.timing_notes
    assert 0 < far.rounds_s < base.rounds_s
    assert far.round_group == base.round_group
    # the decision side: the two rows pair on the rounds they share; far's own interval is well below 1
    mine, theirs = stats.shared_rounds(far, base)
    assert mine == far.round_ms and theirs == base.round_ms[:10]
    against = stats.against(far, base)
    assert against is not None and against.hi < 1.0, against
    df = stats.add_paired_columns(add_speedup(frame(results), "torch")).set_index("backend")
    assert df.loc["far", "speedup_hi"] < 1 / 1.05 and df.loc["torch", "aa"] > 0
