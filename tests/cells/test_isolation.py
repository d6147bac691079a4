"""Worker isolation: each job runs in its own process with a time limit. A segfault, a hang and a wrong answer
are recorded as crashed / timeout / mismatch, and the other results of the cell are intact."""
import pytest

from opmatrix import plan as plan_mod
from opmatrix.incell import servers
from opmatrix.incell.cell_runner import run_cell
from opmatrix.incell.timed_rows import SAMPLES_KEPT
from opmatrix.matrix import load_matrix
from tests.helpers import probe_adapter, probe_matrix, write_plugins

pytestmark = pytest.mark.integration  # worker processes

IMPLS = {
    "good": "def build(w, dtype, device, variant):\n    return lambda x, out: out.copy_(x * 2)\n",
    "wrong": "def build(w, dtype, device, variant):\n    return lambda x, out: out.copy_(x * 2 + 1)\n",
    "partial": "def build(w, dtype, device, variant):\n    return lambda x, out: out[:-1].copy_(x[:-1] * 2)\n",
    "segfault": ("import ctypes\n\ndef build(w, dtype, device, variant):\n"
                 "    def fn(x, out):\n        ctypes.string_at(0)\n    return fn\n"),
    "hang": ("import time\n\ndef build(w, dtype, device, variant):\n"
             "    def fn(x, out):\n        time.sleep(600)\n    return fn\n"),
    "broken": "def build(w, dtype, device, variant):\n    raise RuntimeError('does not compile')\n",
}

PROGRESS: list[str] = []  # what the cell said while it ran (its on_now lines)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("iso")
    write_plugins(root, "probe", IMPLS, probe_adapter())
    probe_matrix(root, "iso", list(IMPLS), ["small"], timeout_s=15, rep_ms=20)
    matrix = load_matrix(root / "m.toml")
    (plan,) = plan_mod.cell_plans(matrix, "iso-run", root / "scratch")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(servers, "WAIT_REPORT_S", 4)
        return {r.backend: r for r in run_cell(plan, on_now=PROGRESS.append)}


def test_every_job_has_exactly_one_result(results):
    assert sorted(results) == sorted(IMPLS)


def test_segfault_is_crashed_with_signal_and_phase(results):
    r = results["segfault"]
    assert r.status == "crashed"
    assert "SIGSEGV" in r.error and "first_call" in r.error


def test_hang_is_killed_as_timeout(results):
    r = results["hang"]
    assert r.status == "timeout"
    assert "killed after 15 s in phase first_call" in r.error
    assert r.duration_s < 30


def test_a_worker_that_hangs_while_it_is_checked_is_named_in_the_progress(results):
    """A build or check that takes long is named while it runs, with its phase and limit, not only after the
    limit (an H200 run once waited 400 s on "building and checking 9 contestant(s)", naming none)."""
    waits = [line for line in PROGRESS if "still building hang," in line]
    assert waits and all("in phase first_call (limit 15 s)" in line for line in waits), PROGRESS
    assert not any("still building good," in line for line in PROGRESS)


def test_wrong_values_are_a_mismatch_with_the_error_measured(results):
    r = results["wrong"]
    assert r.status == "mismatch"
    assert r.rel_err > 0.1 and r.median_ms is None


def test_unwritten_element_is_caught_by_the_poisoned_output(results):
    r = results["partial"]
    assert r.status == "mismatch" and r.rel_err is None  # NaN left in the output
    assert "NaN" in r.error
    assert r.bad_elements == 1 and r.worst_index == "(4095,)"  # the element-wise check says which one


def test_build_exception_is_a_compile_error(results):
    r = results["broken"]
    assert r.status == "compile_error" and "does not compile" in r.error


def test_the_good_result_is_intact_next_to_the_failures(results):
    r = results["good"]
    assert r.status == "ok", r.error
    assert r.rel_err == 0.0 and r.trials == 3
    assert r.median_ms > 0 and r.reps >= 5 and len(r.samples_ms) == min(r.reps, SAMPLES_KEPT)  # a row's cap
    assert r.rerun_median_ms > 0 and r.stability_pct >= 0  # timed twice in the same job
    assert r.ceiling_tflops > 0 and r.ceiling_gbps > 0  # this cell's measured ceilings
    assert 0 < r.roofline_pct  # placed against them
    assert r.clock_dropped is None  # no GPU, no telemetry: nothing claimed
    assert r.torch and r.python and r.device_name  # environment facts recorded with the row
    assert r.cell == "cpu.host" and r.run_id == "iso-run"
