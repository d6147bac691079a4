"""opmatrix installed as a package (no checkout around it) works on the project it is started in: `plan` and `run`
find the project's matrix/, kernels/ and backends/, write reports/ and .opmatrix/ there, never into site-packages,
and cells import this engine through a folder that holds only it."""
import os
import shutil
import subprocess
import sys

import pytest

from opmatrix import paths
from tests.helpers import plugin_root

MATRIX = """
name = "mine"
backends = ["probe"]
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


@pytest.fixture
def installed(tmp_path):
    """site/opmatrix: a copy of the package with no checkout beside it; project/: a user's folder."""
    site = tmp_path / "site"
    shutil.copytree(paths.PACKAGE, site / "opmatrix", ignore=shutil.ignore_patterns("__pycache__", ".opmatrix"))
    project = plugin_root(tmp_path / "project", {"probe": PROBE})
    (project / "matrix").mkdir()
    (project / "matrix" / "mine.toml").write_text(MATRIX)
    env = {k: v for k, v in os.environ.items() if k != paths.ROOT_ENV}
    env["PYTHONPATH"] = str(site)  # ahead of the test environment's own (editable) opmatrix

    def opmatrix(*args, cwd=project):
        return subprocess.run([sys.executable, "-m", "opmatrix", *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=240)
    return site, project, opmatrix


def test_an_installed_opmatrix_plans_the_project_it_is_started_in(installed):
    site, project, opmatrix = installed
    out = opmatrix("plan", "matrix/mine.toml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "cpu.host" in out.stdout and "1 jobs" in out.stdout


def test_an_installed_opmatrix_without_a_matrix_says_what_to_pass(installed, tmp_path):
    site, project, opmatrix = installed
    out = opmatrix("plan", cwd=tmp_path)
    assert out.returncode == 2
    assert "no matrix file given" in out.stderr and "opmatrix run path/to/matrix.toml" in out.stderr


@pytest.mark.integration
def test_an_installed_opmatrix_runs_the_project_through_its_own_cell_noxfile(installed):
    site, project, opmatrix = installed
    out = opmatrix("run", "matrix/mine.toml", "--no-ray", "--run-id", "r1")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert (project / "reports" / "r1" / "report.md").is_file()
    assert "| probe     | ok" in (project / "reports" / "r1" / "report.md").read_text()
    engine = project / ".opmatrix" / "engine" / "opmatrix"
    assert engine.is_symlink() and engine.resolve() == (site / "opmatrix").resolve()
    assert not list(site.rglob(".opmatrix")) and not (site / "reports").exists()  # nothing written by the package
