"""What a job's row says for each way it ends: a broken plugin file is an env_error at load, a Built's
configuration and cache are recorded, an untimed backend is correctness-only, compile-only builds return Compiled.
Each job runs through a worker process and the judge, as the cell runner starts it (tests.helpers.job_row)."""
import json

import pytest

from opmatrix.core.jobs import DeviceInfo, Mode
from tests.helpers import job_row, plugin_root

pytestmark = pytest.mark.integration  # worker processes

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
    row = job_row(tmp_path, "sig")
    assert (row.status, row.phase) == ("env_error", "load")
    assert "kernels/probe/sig.py" in row.error and "build(workload, dtype, device, variant)" in row.error
    row = job_row(tmp_path, "const")
    assert (row.status, row.phase) == ("env_error", "load") and "did you mean RETURNS_OUTPUT" in row.error


def test_a_broken_backend_adapter_is_an_env_error_at_load(tmp_path):
    plugin_root(tmp_path, {"old": GOOD}, adapters={"old": "def available(): return '1'\ndef timer(d): return None\n"})
    row = job_row(tmp_path, "old")
    assert (row.status, row.phase) == ("env_error", "load") and "TIMED" in row.error


def test_built_config_and_cache_are_recorded(tmp_path):
    plugin_root(tmp_path, {"built": BUILT, "plain": GOOD})
    row = job_row(tmp_path, "built")
    assert row.status == "ok", row.error
    assert json.loads(row.config) == {"block": 64} and row.compile_cache == "warm (built by an earlier job)"
    plain = job_row(tmp_path, "plain")
    assert plain.status == "ok" and plain.config == "{}" and plain.compile_cache == "cold"


def test_attributes_on_the_function_are_refused_not_lost(tmp_path):
    plugin_root(tmp_path, {"legacy": LEGACY})
    row = job_row(tmp_path, "legacy")
    assert (row.status, row.phase) == ("env_error", "build") and "opmatrix.kit.Built" in row.error


def test_an_untimed_backend_is_correctness_only_and_a_timed_one_is_timed(tmp_path):
    plugin_root(tmp_path, {"interp": GOOD, "timed": GOOD},
                adapters={"interp": "def available(): return '1'\ndef timed(device): return device.is_gpu\n"})
    row = job_row(tmp_path, "interp")
    assert row.status == "ok" and row.timer == "correctness-only" and row.median_ms is None and row.trials == 3
    assert row.input_sets == row.timed_checks == 3  # every trial on contents of its own, every one checked
    # A timed backend's job is ready to be timed in rounds once its trials passed (job_row asks for no rounds)
    served = job_row(tmp_path, "timed")
    assert served.status == "ok" and served.trials == 3 and served.timer == "" and served.compile_s > 0


def test_compile_for_returns_compiled(tmp_path):
    plugin_root(tmp_path, {"ok": COMPILE_OK, "dict": COMPILE_DICT})
    gpu = dict(mode=Mode.COMPILE, device=DeviceInfo("mi300x", "amd", "gfx942"))  # no host has it
    row = job_row(tmp_path, "ok", **gpu)
    assert row.status == "lowers" and "device source" in row.error and json.loads(row.config) == {"target": "gfx942"}
    row = job_row(tmp_path, "dict", **gpu)
    assert row.status == "env_error" and "opmatrix.kit.Compiled" in row.error


def test_an_output_of_the_wrong_shape_is_a_mismatch(tmp_path):
    plugin_root(tmp_path, {"shape": "RETURNS_OUTPUT = True\ndef build(workload, dtype, device, variant):\n"
                                    "    return lambda x, out: x[:-1] * 2\n"})
    row = job_row(tmp_path, "shape")
    assert row.status == "mismatch" and "shape (255,)" in row.error and "(256,)" in row.error


def test_running_out_of_host_memory_is_oom_on_a_cpu_as_on_a_gpu(tmp_path):
    """A CPU allocation the host cannot give (a terabyte) is `oom` in the phase it happened, like a GPU's."""
    plugin_root(tmp_path, {
        "greedy_build": "import torch\ndef build(workload, dtype, device, variant):\n"
                        "    torch.empty(2 ** 40, dtype=torch.uint8)\n    return lambda x, out: out.copy_(x * 2)\n",
        "greedy_call": "import torch\ndef build(workload, dtype, device, variant):\n"
                       "    return lambda x, out: out.copy_(torch.empty(2 ** 40, dtype=torch.uint8)[:1] + x * 2)\n"})
    built = job_row(tmp_path, "greedy_build")
    assert (built.status, built.phase) == ("oom", "build") and "can't allocate memory" in built.error, built.error
    called = job_row(tmp_path, "greedy_call")
    assert (called.status, called.phase) == ("oom", "first_call"), (called.status, called.phase, called.error)
