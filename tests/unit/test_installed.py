"""opmatrix installed as a package (no checkout around it) plans the project it is started in: a copy of the
package as installed (tests/installed_package.py), started in a user's folder, finds the project's matrix/ and
kernels/ beside the kernels and backend adapters the package ships, and without a matrix says what to pass. Its
runs, and the wheel built from the checkout and installed into a fresh virtual environment:
tests/cells/test_installed.py."""
import pytest

from tests.installed_package import installed_copy


@pytest.fixture
def installed(tmp_path):
    """(site, project, opmatrix): tests/installed_package.installed_copy."""
    return installed_copy(tmp_path)


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
