"""`opmatrix bisect` without runs: the search over a planted truth (every possible first bad version of fakeblas
1.0 ... 1.7 found in log2 probes, a neighbour that disagrees, a probe too noisy to judge), the probe matrices it
derives from the project of tests/bisect_project.py (both sides pinned, the excludes that still apply) and the
matrix's find_links checks. The real bisections, in nox cells: tests/cells/test_bisect.py and
test_bisect_toolchains.py."""
import dataclasses

import pytest

from opmatrix.matrix import MatrixError, load_matrix
from opmatrix.commands import bisect_probe
from opmatrix.upgrade import bisect
from opmatrix.upgrade.bisect import BAD, FOUND, GOOD, OPEN, RECHECK, UNCONFIRMED, UNKNOWN, Probe
from tests.bisect_project import VERSIONS, fakeblas_project


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """(project root, local index): tests/bisect_project.py, made once for this module."""
    return fakeblas_project(tmp_path_factory)


def planted(first_bad: str | None, unknown: tuple = (), flaky: tuple = ()):
    """A probe function over a planted truth (versions at or after first_bad are bad), counting its calls."""
    calls = []

    def probe(version: str, role: str) -> Probe:
        calls.append((version, role))
        bad = first_bad is not None and bisect_probe.Version(version) >= bisect_probe.Version(first_bad)
        verdict = UNKNOWN if version in unknown else (not bad if version in flaky and role == RECHECK else bad)
        return Probe(version, verdict if verdict == UNKNOWN else (BAD if verdict else GOOD))

    return probe, calls


@pytest.mark.parametrize("first_bad", VERSIONS[1:])
def test_the_search_finds_every_possible_first_bad_version_in_log2_probes(first_bad):
    probe, calls = planted(first_bad)
    result = bisect.bisect("fakeblas", "t", VERSIONS, probe)
    assert (result.verdict, result.first_bad) == (FOUND, first_bad)
    assert result.search_probes() <= 4  # the bad end, then at most ceil(log2(7)) = 3
    assert len(calls) - result.search_probes() <= 2  # the neighbours, those that exist beyond the good end


def test_a_neighbour_that_disagrees_leaves_the_answer_unconfirmed_and_unknown_stops_the_search():
    probe, _ = planted("1.5", flaky=("1.6",))
    assert bisect.bisect("fakeblas", "t", VERSIONS, probe).verdict == UNCONFIRMED
    probe, calls = planted("1.5", unknown=("1.3",))
    result = bisect.bisect("fakeblas", "t", VERSIONS, probe)
    assert (result.verdict, result.last_good, result.first_bad, len(calls)) == (OPEN, "1.0", "1.7", 2)
    assert "run again" in result.summary()


def test_a_probe_too_noisy_to_see_the_resolution_is_unknown_not_good():
    quiet = bisect_probe.compare.RowChange("cpu", "k", "w", "float32", "fb", status_before="ok", status_after="ok",
                                           time_ratio=1.0, time_lo=0.98, time_hi=1.02, threshold=1.05, aa_floor=0.01)
    assert bisect.judged("1.2", quiet, "r").verdict == GOOD
    noisy = dataclasses.replace(quiet, time_lo=0.3, time_hi=4.2, threshold=268.0, aa_floor=133.7)
    probe = bisect.judged("1.2", noisy, "r")
    assert probe.verdict == UNKNOWN and "too noisy to judge speed: the threshold 268" in probe.why[-1]
    assert bisect.judged("1.2", noisy, "r", watch=("correctness",)).verdict == GOOD  # speed not watched
    assert bisect.judged("1.2", noisy, "r", resolution=300).verdict == GOOD


def test_a_good_version_that_does_not_run_is_no_reference():
    gained = bisect_probe.compare.RowChange("cpu", "k", "w", "float32", "fb", outcome=bisect_probe.compare.IMPROVED,
                                            status_before="not_installed", status_after="ok")
    probe = bisect.judged("1.5", gained, "probe-01-1.5")
    assert probe.verdict == UNKNOWN and "the good version's own row is not_installed" in probe.why[0]


def test_find_links_must_be_an_existing_absolute_folder(project, write_matrix):
    root, index = project
    text = (root / "m.toml").read_text()
    for bad, message in ((f"file://{index}", "not an absolute folder path"), ("wheels", "not an absolute folder path"),
                         ("/no/such/folder", "no such folder on this host")):
        with pytest.raises(MatrixError, match=rf"toolchain\[0\]\.find_links = '{bad}': {message}"):
            load_matrix(write_matrix(text.replace(str(index), bad)))


def test_a_probe_matrix_pins_both_sides_and_compares_them(project):
    root, index = project
    m = load_matrix(root / "m.toml")
    target = bisect_probe.choose_target(m, "fakeblas", None, None, None, None, None, None)
    derived = root / "derived.toml"
    derived.write_text(bisect_probe.toml(bisect_probe.probe_matrix(m, target, "fakeblas", "1.0", "1.5")))
    d = load_matrix(derived)
    assert [(t.name, t.packages, t.find_links) for t in d.toolchain] == [
        ("fakeblas-1.0", ["fakeblas==1.0"], str(index)), ("fakeblas-1.5", ["fakeblas==1.5"], str(index))]
    assert [(c.baseline, c.candidate) for c in d.compare] == [("fakeblas-1.0", "fakeblas-1.5")]
    assert d.kernels_dir() == m.kernels_dir() and d.backends == ["fb", "torch"]


def test_a_probe_keeps_the_excludes_that_still_apply(project, write_matrix):
    root, _ = project
    text = (root / "m.toml").read_text().replace('kernels_dir = "kernels"', f'kernels_dir = "{root}/kernels"').replace(
        'backends_dir = "backends"', f'backends_dir = "{root}/backends"')
    m = load_matrix(write_matrix(text + '[[device]]\nid = "cpu2"\nvendor = "cpu"\narch = "auto"\n'
                                 '[[exclude]]\nbackend = "fb"\nvariant = "other"\n[[exclude]]\ntoolchain = '
                                 '"host"\nworkload = "n256"\nvariant = "x"\n[[exclude]]\ndevice = "cpu2"\n'))
    target = bisect_probe.choose_target(m, "fakeblas", "cpu", None, None, None, None, None)
    kept = bisect_probe.probe_matrix(m, target, "fakeblas", "1.0", "1.5")["exclude"]
    assert kept == [{"backend": "fb", "variant": "other"}, {"workload": "n256", "variant": "x"}]
