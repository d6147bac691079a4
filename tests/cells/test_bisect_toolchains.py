"""`opmatrix bisect` for real on the CPU, part two (part one, the package bisection that must find the planted
slowdown in four probes: test_bisect.py beside this one; two files so that `--dist loadfile` runs their probes side
by side): a range without a bad version says so after one probe, and a bisection over the matrix's named toolchains
(a rollout's steps, tests/bisect_project.py's fleet matrix) finds the first bad step. Same local index of fakeblas
wheels and project (tests/bisect_project.py; each file makes its own, once). The search logic and the probe
matrices without runs: tests/unit/test_bisect.py, test_bisect_toolchains.py."""
import json
import subprocess
import sys

import pytest

from opmatrix.upgrade.bisect import BAD, FOUND, GOOD, NONE_BAD, RECHECK
from tests.bisect_project import FLEET, bisect_cli, fakeblas_project, fleet_matrix


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """(project root, local index): tests/bisect_project.py, made once for this module."""
    return fakeblas_project(tmp_path_factory)


@pytest.mark.integration
def test_a_range_without_a_bad_version_says_so_after_one_probe(project):
    root, _ = project
    out = bisect_cli(root, "--versions", "1.0,1.4", "--run-id", "clean", "--json", "--resolution", "1")
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout)
    assert (result["verdict"], result["first_bad"], len(result["probes"])) == (NONE_BAD, None, 1)
    assert result["summary"].startswith("no version of fakeblas 1.0 .. 1.4 (2 versions) is bad")


@pytest.mark.integration
def test_bisect_over_named_toolchains_finds_the_first_bad_step(project):
    """--toolchains: each step a toolchain of the matrix, probed against the first in the same rounds."""
    root, _ = project
    out = subprocess.run([sys.executable, "-m", "opmatrix", "bisect", str(fleet_matrix(root)), "--toolchains",
                          ",".join(FLEET), "--reports", str(root / "reports"), "--run-id", "fleet", "--json",
                          "--resolution", "1"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 1, out.stderr[-3000:]
    result = json.loads(out.stdout)
    assert (result["verdict"], result["first_bad"], result["last_good"]) == (FOUND, "nightly", "canary")
    assert [(p["version"], p["role"], p["verdict"]) for p in result["probes"]] == [
        ("nightly", "search", BAD), ("canary", "search", GOOD), ("canary", RECHECK, GOOD)]
    assert result["summary"].startswith("first bad version of toolchains stable .. nightly (3 versions)")
