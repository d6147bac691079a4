"""`opmatrix bisect --toolchains` without a run: the steps of a rollout named as the matrix's toolchains
(tests/bisect_project.py's fleet matrix) are checked by name, and a probe matrix compares two of them as they are,
each with its own pins and variables. The bisection itself, in nox cells: tests/cells/test_bisect_toolchains.py."""
import pytest

from opmatrix.commands import bisect_probe
from opmatrix.matrix import load_matrix
from tests.bisect_project import FLEET, fakeblas_project, fleet_matrix


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """(project root, local index): tests/bisect_project.py, made once for this module."""
    return fakeblas_project(tmp_path_factory)


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
