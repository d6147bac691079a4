"""What the worker writes into a row for each way a job ends: a broken plugin file is an env_error at load, a
Built's configuration and cache are recorded, an untimed backend is correctness-only, compile-only builds return
Compiled. The jobs run through the worker's phases in this process (tests.helpers.worker_row), except
where a worker process is started (integration: not in the fast lane)."""
import json

import pytest

from opmatrix.core.jobs import DeviceInfo, Mode
from tests.helpers import plugin_root, worker_process_row, worker_row

GOOD = "def build(workload, dtype, device, variant):\n    return lambda x, out: out.copy_(x * 2)\n"
BUILT = """
from opmatrix.kit import Built

def build(workload, dtype, device, variant):
    return Built(lambda x, out: out.copy_(x * 2), {"block": 64}, cache="warm (built by an earlier job)")
"""
LEGACY = """
def build(workload, dtype, device, variant):
    def fn(x, out):
        out.copy_(x * 2)
    fn.config = {"block": 64}
    return fn
"""
COMPILE_DICT = GOOD + """
def compile_for(workload, dtype, device, variant):
    return {"status": "compiles", "what": "a binary"}
"""
COMPILE_OK = GOOD + """
from opmatrix.kit import Compiled

def compile_for(workload, dtype, device, variant):
    return Compiled("lowers", "device source", {"target": device.arch})
"""


def test_a_plugin_error_at_load_is_an_env_error_in_phase_load_with_the_loaders_message(tmp_path):
    plugin_root(tmp_path, {"sig": "def build(workload, dtype, device):\n    pass\n",
                           "const": "RETURN_OUTPUT = True\n" + GOOD})
    row = worker_row(tmp_path, "sig")
    assert (row.status, row.phase) == ("env_error", "load")
    assert "kernels/probe/sig.py" in row.error and "build(workload, dtype, device, variant)" in row.error
    row = worker_row(tmp_path, "const")
    assert (row.status, row.phase) == ("env_error", "load") and "did you mean RETURNS_OUTPUT" in row.error


def test_a_broken_backend_adapter_is_an_env_error_at_load(tmp_path):
    plugin_root(tmp_path, {"old": GOOD}, adapters={"old": "def available(): return '1'\ndef timer(d): return None\n"})
    row = worker_row(tmp_path, "old")
    assert (row.status, row.phase) == ("env_error", "load") and "TIMED" in row.error


@pytest.mark.integration  # starts a worker process (worker_process_row)
def test_built_config_and_cache_are_recorded(tmp_path):
    plugin_root(tmp_path, {"built": BUILT, "plain": GOOD})
    row = worker_process_row(tmp_path, "built", "probe", "quick", "float32")
    assert row.status == "ok", row.error
    assert json.loads(row.config) == {"block": 64} and row.compile_cache == "warm (built by an earlier job)"
    plain = worker_process_row(tmp_path, "plain", "probe", "quick", "float32")
    assert plain.status == "ok" and plain.config == "{}" and plain.compile_cache == "cold"


def test_attributes_on_the_function_are_refused_not_lost(tmp_path):
    plugin_root(tmp_path, {"legacy": LEGACY})
    row = worker_row(tmp_path, "legacy")
    assert (row.status, row.phase) == ("env_error", "build") and "opmatrix.kit.Built" in row.error


@pytest.mark.integration  # starts a worker process (worker_process_row)
def test_an_untimed_backend_is_correctness_only_and_a_timed_one_is_timed(tmp_path):
    plugin_root(tmp_path, {"interp": GOOD, "timed": GOOD},
                adapters={"interp": "def available(): return '1'\ndef timed(device): return device.is_gpu\n"})
    row = worker_row(tmp_path, "interp")
    assert row.status == "ok" and row.timer == "correctness-only" and row.median_ms is None and row.trials == 3
    # A timed backend's worker does not time itself: it becomes a timing server for the cell runner's rounds.
    row = worker_row(tmp_path, "timed")
    assert (row.status, row.phase) == ("runtime_error", "timing") and "cell runner" in row.error
    served = worker_process_row(tmp_path, "timed", "probe", "quick", "float32")
    assert served.status == "ok" and served.trials == 3 and served.phase == "done"


def test_compile_for_returns_compiled(tmp_path):
    plugin_root(tmp_path, {"ok": COMPILE_OK, "dict": COMPILE_DICT})
    gpu = dict(mode=Mode.COMPILE, device=DeviceInfo("mi300x", "amd", "gfx942"))  # no host has it
    row = worker_row(tmp_path, "ok", **gpu)
    assert row.status == "lowers" and "device source" in row.error and json.loads(row.config) == {"target": "gfx942"}
    row = worker_row(tmp_path, "dict", **gpu)
    assert row.status == "env_error" and "opmatrix.kit.Compiled" in row.error


def test_an_output_of_the_wrong_shape_is_a_mismatch(tmp_path):
    plugin_root(tmp_path, {"shape": "RETURNS_OUTPUT = True\ndef build(workload, dtype, device, variant):\n"
                                    "    return lambda x, out: x[:-1] * 2\n"})
    row = worker_row(tmp_path, "shape")
    assert row.status == "mismatch" and "shape (255,)" in row.error and "(256,)" in row.error


def test_the_prepared_timing_call_takes_no_arguments_rotates_its_input_sets_and_can_be_timed_again():
    """What a timing server keeps: one prepared call over its own seeded input sets, timed in as many bursts as
    asked, each followed by its checked calls."""
    import torch

    from opmatrix.incell import correctness, integrity, measure

    calls = []

    def kernel(x, out):
        calls.append(x.data_ptr())
        out.copy_(x * 2)

    def make(seed):
        return (torch.randn(8, generator=torch.Generator().manual_seed(seed)),)

    def reference(inputs):
        return inputs[0].double() * 2

    sets, note = integrity.make_sets(make, lambda: torch.empty(8), reference, 7, "cpu")
    assert len(sets) == integrity.INPUT_SETS and note == ""
    timed_call = integrity.TimedCall(kernel, sets, False, "cpu", lambda: correctness.Verdict(1e-6, 0, 1e-6),
                                     lambda seed: (make(seed), reference(make(seed))), 100)
    timed_call()
    timed_call()
    assert len(set(calls)) == integrity.INPUT_SETS  # the second call had the other set's buffers
    bursts = [measure.time_callable(timed_call, "cpu", warmup_ms=0, rep_ms=1) for _ in range(2)]
    for burst in bursts:
        timed_call.after_burst(burst.samples_ms)
    assert all(len(b.samples_ms) >= measure.MIN_REPS for b in bursts) and len(calls) >= 2 * measure.MIN_REPS
    assert timed_call.checks.passed == 2 * integrity.CHECKS_PER_BURST
