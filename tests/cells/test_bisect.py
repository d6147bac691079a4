"""`opmatrix bisect` for real on the CPU, against a planted truth: a local package index of wheels fakeblas 1.0 ...
1.7, where 1.5 doubles the time of the kernel's call (tests/bisect_project.py); the bisection installs them into
real nox cell environments (through the toolchain's find_links folder), times each probed version against 1.0 in
the same rounds, and must name 1.5 in at most 4 search probes, then re-check its neighbours; its versions and target
are checked against the index before any probe. A range without a bad version, and the bisection over named
toolchains: test_bisect_toolchains.py beside this one (two files, so that `--dist loadfile` runs their probes side by
side). The search logic and the probe matrices without runs: tests/unit/test_bisect.py."""
import json
from xml.etree import ElementTree as ET

import pytest

from opmatrix.commands import bisect_probe
from opmatrix.matrix import load_matrix
from opmatrix.upgrade.bisect import BAD, FOUND, GOOD, RECHECK
from tests.bisect_project import FIRST_BAD, VERSIONS, bisect_cli, fakeblas_project


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """(project root, local index): tests/bisect_project.py, made once for this module."""
    return fakeblas_project(tmp_path_factory)


@pytest.mark.integration
def test_bisect_finds_the_planted_slowdown_in_four_probes(project):
    root, _ = project
    # --resolution 1: a noisy round on this shared machine may widen one probe's A/A floor; the planted slowdown is
    # judged by its interval against the threshold either way
    out = bisect_cli(root, "--good", "1.0", "--bad", "1.7", "--run-id", "found", "--junit", str(root / "b.xml"),
                     "--resolution", "1")
    assert out.returncode == 1, out.stderr[-3000:]  # a bad version lies in the range: a CI gate fails
    result = json.loads((root / "reports" / "found" / "bisect.json").read_text())
    assert result["versions"] == VERSIONS  # from the index the toolchain names
    assert (result["verdict"], result["first_bad"], result["last_good"]) == (FOUND, FIRST_BAD, "1.4")
    search = [p for p in result["probes"] if p["role"] == "search"]
    assert [p["version"] for p in search] == ["1.7", "1.3", "1.5", "1.4"] and result["search_probes"] <= 4
    assert [(p["version"], p["verdict"]) for p in result["probes"] if p["role"] == RECHECK] == [("1.4", GOOD),
                                                                                             ("1.6", BAD)]
    for p in result["probes"]:  # each probe timed in the same rounds as 1.0: its interval says how much slower
        slower = p["version"] >= FIRST_BAD
        assert (p["time_lo"] > p["threshold"]) == slower and (p["verdict"] == BAD) == slower, p
    assert "## bisect fakeblas 1.0 -> 1.7: **1.5**" in out.stdout
    cases = ET.parse(root / "b.xml").getroot().find("testsuite").findall("testcase")
    assert len(cases) == len(result["probes"]) and sum(c.find("failure") is not None for c in cases) == 3
    probe_run = root / "reports" / "found" / result["probes"][0]["run"]
    rows = [json.loads(line) for line in (probe_run / "results.jsonl").read_text().splitlines()]
    assert {(r["toolchain"], r["backend_version"]) for r in rows if r["backend"] == "fb"} == {
        ("fakeblas-1.0", "1.0"), ("fakeblas-1.7", "1.7")}  # each side imported its own installed version


@pytest.mark.integration  # pip and opmatrix in subprocesses: seconds
def test_versions_and_targets_are_checked_before_any_probe(project):
    root, index = project
    m = load_matrix(root / "m.toml")
    target = bisect_probe.choose_target(m, "fakeblas", None, None, None, None, None, None)
    assert target.label() == "cpu scale n256 float32 fb" and target.toolchain == "host"
    with pytest.raises(bisect_probe.BisectError, match=r"--backend cuda: the matrix has no such backend; choices: fb"):
        bisect_probe.choose_target(m, "fakeblas", None, None, None, None, None, "cuda")
    with pytest.raises(bisect_probe.BisectError, match=r"--good 0.9: not a version the index offers; versions: 1.0"):
        bisect_probe.between(VERSIONS, "0.9", "1.7")
    with pytest.raises(bisect_probe.BisectError, match="give two or more distinct versions in increasing order"):
        bisect_probe.listed("1.5,1.2")
    assert bisect_probe.between(bisect_probe.available_versions(m, target, "fakeblas"), "1.2", "1.4") == [
        "1.2", "1.3", "1.4"]
    out = bisect_cli(root, "--good", "1.0")
    assert out.returncode == 2 and "name what to search, one way: --good V1 --bad V2" in out.stderr
