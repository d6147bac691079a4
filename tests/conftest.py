"""Fixtures shared by the test modules. Helpers (probe kernels, plugin folders, worker runs) are in tests/helpers.py."""
import os
import textwrap
from pathlib import Path

import pytest

# `run` and `report` write no report.html / comparison.html in this suite (opmatrix.run.HTML_ENV: a matplotlib
# import and a second or two of charts per run), except in the tests of the pages, which ask for `html_pages`.
# Set here, so every `opmatrix` subprocess inherits it; OPMATRIX_HTML=1 pytest ... writes them everywhere.
os.environ.setdefault("OPMATRIX_HTML", "0")


@pytest.fixture
def write_matrix(tmp_path):
    """Write a matrix file into tmp_path from TOML text; returns its path."""

    def write(text: str, name: str = "m.toml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


@pytest.fixture(scope="module")
def html_pages():
    """report.html and comparison.html are written again, for a module that reads them."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("OPMATRIX_HTML", raising=False)
        yield


# With `pytest -n N --dist loadfile` (noxfile.py) each file runs whole on one worker, so the wall time is bounded by
# the file that starts last and runs long. xdist hands out files in collection order (once reordering by test count
# is off, below): the longest files, by their measured time on two cores (seconds, roughly), go first, and the many
# short ones fill in beside them. A file not listed keeps its place after these. Only the order changes.
LONGEST_FIRST = {
    "tests/test_ray_cluster.py": 300,
    "tests/faults/test_run_faults.py": 200,
    "tests/test_compile_only_cells.py": 185,
    "tests/test_bisect.py": 170,  # six probes, each a real run of two nox cells
    "tests/test_bisect_toolchains.py": 90,  # its other two bisections (four probes), split off to run beside it
    "tests/test_kernels_model_ops_h200.py": 150,
    "tests/test_kernels_model_ops.py": 140,
    "tests/test_ray_embedded.py": 130,
    "tests/test_paired_timing.py": 115,
    "tests/test_nox_cells.py": 100,
    "tests/test_default_style_cpu.py": 85,
    "tests/test_upgrade_cells.py": 85,
    "tests/faults/test_run_kill_faults.py": 80,
    "tests/test_resume.py": 65,
    "tests/test_reports.py": 55,  # 40 golden rebuilds (25 s of CPU): started last, it ran alone for 22 s
    "tests/faults/test_kernel_faults.py": 50,
    "tests/test_validate.py": 45,
    "tests/test_report_html.py": 45,
    "tests/test_upgrade_compare.py": 40,
    "tests/test_verdicts.py": 35,
    "tests/test_isolation.py": 30,
    "tests/test_worker_elementwise.py": 25,
    "tests/test_job_scratch.py": 20,
    "tests/test_report_browser.py": 20,
    "tests/test_worker_rows.py": 20,
}


def pytest_configure(config):
    # xdist's default (--loadscope-reorder) sorts files by their number of tests, which sends a long file of one
    # test (test_compile_only_cells.py) last; keep the order below instead.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    def cost(item) -> float:
        return -LONGEST_FIRST.get(item.nodeid.split("::")[0], 0)

    items.sort(key=cost)  # stable: each file's own order is kept
