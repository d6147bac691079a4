"""Helpers of the tests of build outcomes and build caches kept between runs (opmatrix.incell.compile_cache;
test_compile_cache.py in tests/unit and tests/cells): two small projects. One for a device no host has, whose
contestants lower (`src`) or refuse (`no`) in compile_for; one on this CPU whose `warm` contestant finds its earlier
build's output in the cache folder its adapter names, as a compiler's cache would."""
from pathlib import Path

from tests.helpers import plugin_root, probe_matrix


LOWERS = """
from opmatrix.kit import Compiled
def build(workload, dtype, device, variant):
    raise AssertionError("never run: no host has the device")
def compile_for(workload, dtype, device, variant):
    return Compiled("lowers", f"{device.arch} source")
"""
REFUSES = """
from opmatrix.kit import Unsupported
def build(workload, dtype, device, variant):
    raise AssertionError("never run")
def compile_for(workload, dtype, device, variant):
    raise Unsupported("not for this GPU")
"""
MATRIX = """
name = "cc"
backends = ["src", "no"]
[run]
kernels_dir = "kernels"
backends_dir = "backends"
[[device]]
id = "far"
vendor = "nvidia"
arch = "sm_90"
name = "Nowhere GPU"
[[toolchain]]
name = "host"
system = true
[[kernel]]
name = "probe"
workloads = { nvidia = ["quick"] }
dtypes = { nvidia = ["float32"] }
"""


WARMABLE = """
import os
from pathlib import Path
from opmatrix.kit import Built
def build(workload, dtype, device, variant):
    cache = Path(os.environ["PROBE_CACHE"])
    found = (cache / "compiled").is_file()  # what a compiler's cache hit is: an earlier build's output
    (cache / "compiled").write_text("object code")
    def fn(x, out):
        out.copy_(x * 2)
    return Built(fn, {"found": found})
"""
WARMABLE_ADAPTER = """
def available():
    import torch
    return torch.__version__
def environment(device, cache_dir):
    return {"PROBE_CACHE": str(cache_dir)}
"""
TORCH = """
def build(workload, dtype, device, variant):
    def fn(x, out):
        out.copy_(x + x)
    return fn
"""


def lowering_project(root: Path) -> Path:
    """root/: the probe kernel's `src` (lowers) and `no` (refuses) for the far device, and m.toml over them."""
    plugin_root(root, {"src": LOWERS, "no": REFUSES})
    (root / "m.toml").write_text(MATRIX)
    return root


def warm_project(root: Path) -> Path:
    """root/: the probe kernel's torch and `warm` on this CPU, and m.toml asking for kept build caches."""
    plugin_root(root, {"torch": TORCH, "warm": WARMABLE}, {"warm": WARMABLE_ADAPTER})
    matrix = probe_matrix(root, "kept", ["torch", "warm"], ["quick"], timeout_s=120, rep_ms=5)
    matrix.write_text(matrix.read_text().replace("[run]", '[run]\nbuild_cache = "kept"'))
    return root
