"""Helper of the tests of opmatrix installed as a package (test_installed.py, in tests/unit and tests/cells): a copy
of the package as installed, the built-in plugins inside it (builtin/kernels, builtin/backends), with no checkout
beside it, a user's project of one probe kernel and matrix/mine.toml, and the command line run from that copy."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from opmatrix import paths
from tests.helpers import plugin_root

MATRIX = """
name = "mine"
backends = ["probe"]
[acceptance]
baseline = "probe"  # the project's own framework path: its run reaches a verdict (else it exits 5)
[run]
rounds = 10
max_rounds = 10
burst_ms = 1
burst_warmup_ms = 0
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
[[toolchain]]
name = "host"
system = true
[[kernel]]
name = "probe"
workloads = { cpu = ["quick"] }
dtypes = { cpu = ["float32"] }
"""
PROBE = "def build(workload, dtype, device, variant):\n    return lambda x, out: out.copy_(x * 2)\n"
IGNORED = shutil.ignore_patterns("__pycache__", ".opmatrix")


def installed_copy(tmp_path: Path):
    """(site, project, opmatrix): site/opmatrix, the package as installed with no checkout beside it; project/, a
    user's folder; opmatrix(*args, cwd=project), the command line of that copy."""
    site = tmp_path / "site"
    shutil.copytree(paths.PACKAGE, site / "opmatrix", ignore=IGNORED)
    shutil.copytree(paths.BUILTIN_KERNELS, site / "opmatrix" / "builtin" / "kernels", ignore=IGNORED)
    shutil.copytree(paths.BUILTIN_BACKENDS, site / "opmatrix" / "builtin" / "backends", ignore=IGNORED)
    project = plugin_root(tmp_path / "project", {"probe": PROBE})
    (project / "matrix").mkdir()
    (project / "matrix" / "mine.toml").write_text(MATRIX)
    env = {k: v for k, v in os.environ.items() if k != paths.ROOT_ENV}
    env["PYTHONPATH"] = str(site)  # ahead of the test environment's own (editable) opmatrix

    def opmatrix(*args, cwd=project):
        return subprocess.run([sys.executable, "-m", "opmatrix", *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=240)
    return site, project, opmatrix
