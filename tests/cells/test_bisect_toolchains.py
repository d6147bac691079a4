"""`opmatrix bisect` for real on the CPU, part two (part one, the package bisection that must find the planted
slowdown in four probes, and the search logic without runs: test_bisect.py; two files so that `--dist loadfile` runs
their probes side by side): a range without a bad version says so after one probe, and a bisection over the
matrix's named toolchains (a rollout's steps) finds the first bad step. Same local index of fakeblas wheels and
project (tests/bisect_project.py; each file makes its own, once)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from opmatrix.commands import bisect_probe
from opmatrix.matrix import load_matrix
from opmatrix.upgrade.bisect import BAD, FOUND, GOOD, NONE_BAD, RECHECK
from tests.bisect_project import bisect_cli, fakeblas_project


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


FLEET = {"stable": "1.0", "canary": "1.4", "nightly": "1.6"}  # three steps of a rollout, named toolchains


def fleet_matrix(root: Path) -> Path:
    """The project's matrix with the rollout's three toolchains in place of its one (each its own pins and an
    environment variable of its own, as a rollout step that changes more than one package would have)."""
    text = (root / "m.toml").read_text()
    head, _, tail = text.partition("[[toolchain]]")
    find_links = next(line for line in tail.splitlines() if line.strip().startswith("find_links"))
    kernel = tail[tail.index("[[kernel]]"):]
    toolchains = "".join(f'[[toolchain]]\nname = "{name}"\nsystem = true\npackages = ["fakeblas=={v}"]\n'
                         f'{find_links.strip()}\nenv = {{ ROLLOUT_STEP = "{name}" }}\n\n' for name, v in FLEET.items())
    path = root / "fleet.toml"
    path.write_text(head + toolchains + kernel)
    return path


def test_a_toolchain_bisection_probes_the_named_toolchains_as_they_are(project):
    root, index = project
    m = load_matrix(fleet_matrix(root))
    assert bisect_probe.named(m, "stable, canary,nightly") == list(FLEET)
    for text, message in (("stable,beta", "the matrix has no toolchain beta; choices: stable, canary, nightly"),
                          ("stable", "give two or more distinct toolchains in order"),
                          ("stable,stable", "give two or more distinct toolchains in order")):
        with pytest.raises(bisect_probe.BisectError, match=message):
            bisect_probe.named(m, text)
    target = bisect_probe.choose_target(m, None, None, "stable", None, None, None, None)
    derived = root / "derived-fleet.toml"
    derived.write_text(bisect_probe.toml(bisect_probe.probe_matrix(m, target, None, "stable", "nightly")))
    d = load_matrix(derived)
    assert [(t.name, t.packages, t.env) for t in d.toolchain] == [
        ("stable", ["fakeblas==1.0"], {"ROLLOUT_STEP": "stable"}),
        ("nightly", ["fakeblas==1.6"], {"ROLLOUT_STEP": "nightly"})]
    assert [(c.baseline, c.candidate) for c in d.compare] == [("stable", "nightly")]


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
