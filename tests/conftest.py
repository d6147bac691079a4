"""Fixtures shared by the test modules of every lane folder (unit/, cells/, golden/, faults/, adversarial/: see
tests/unit/test_lanes.py). Helpers (probe kernels, plugin folders, worker runs) are in tests/helpers.py."""
import os
import textwrap
from pathlib import Path

import pytest

# `run` and `report` write no report.html / comparison.html in this suite (opmatrix.report.build.HTML_ENV: a
# matplotlib import and a second or two of charts per run), except in the tests of the pages, which ask for
# `html_pages`.
# Set here, so every `opmatrix` subprocess inherits it; OPMATRIX_HTML=1 pytest ... writes them everywhere.
os.environ.setdefault("OPMATRIX_HTML", "0")


@pytest.fixture(scope="session", autouse=True)
def host_cache_of_this_session(tmp_path_factory):
    """What the host keeps between runs (kept ceilings, inductor's vector-ISA programs: opmatrix.incell.host_cache)
    in a folder of this pytest session's, shared by its xdist workers (the parent of their base temp folders): the
    suite's cells measure once and serve each other, as a user's runs on one host do, without reading or writing the
    user's own (~/.cache/opmatrix)."""
    from opmatrix.incell import host_cache

    shared = tmp_path_factory.getbasetemp()
    shared = shared.parent if os.environ.get("PYTEST_XDIST_WORKER") else shared
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(host_cache.ROOT_ENV, str(shared / "host-cache"))
        yield


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
# is off, below): the longest files go first, and the many short ones fill in beside them. A file not listed keeps
# its place after these. Only the order changes. Seconds: the file's setup + call + teardown in the quiet suite run
# of 2026-12-02 (`-n 3 --dist loadfile` on the 2-core machine, 470 s wall, 801 passed; --durations' top 60, so a
# lower bound for a file of many short tests), except where noted. A file split since into its unit half and its
# cells (or golden) half lends its figure to the half that took that time; tests/unit/test_lanes.py checks that
# every file named here exists.
LONGEST_FIRST = {
    "tests/cells/test_ray_cluster.py": 92,
    "tests/cells/test_bisect.py": 81,  # six probes, each a real run of two nox cells
    "tests/cells/test_paired_timing.py": 76,
    "tests/cells/test_compile_only_cells.py": 75,  # with test_compile_only_hopper.py: 114 s as one file in that run,
    "tests/cells/test_compile_only_hopper.py": 75,  # 82 s alone -> 55 + 56 s side by side (-n 2): scaled to the suite
    "tests/cells/test_kernels_model_ops.py": 71,
    "tests/cells/test_ray_embedded.py": 62,
    "tests/faults/test_run_faults.py": 56,
    "tests/cells/test_bisect_toolchains.py": 55,  # its other two bisections (four probes), split off to run beside it
    "tests/cells/test_default_style_cpu.py": 48,
    "tests/faults/test_disk_full_faults.py": 40,
    "tests/faults/test_runner_faults.py": 39,
    "tests/cells/test_resume.py": 38,
    "tests/cells/test_contestants_cells.py": 40,  # 17 s, and 23 s for the CuTe DSL flash attention builds (587a7f5)
    "tests/cells/test_contestants_flash_attention.py": 37,
    "tests/cells/test_nox_cells.py": 33,
    "tests/cells/test_upgrade_cells.py": 32,
    "tests/faults/test_ray_signal_faults.py": 29,
    "tests/unit/test_upgrade_compare.py": 27,
    "tests/cells/test_fleet_ray.py": 27,
    "tests/faults/test_run_kill_faults.py": 25,
    "tests/golden/test_reports.py": 25,  # 40 golden rebuilds of < 1 s each (none in the top 60; 25 s of CPU): not last
    "tests/cells/test_installed.py": 20,
    "tests/cells/test_isolation.py": 19,
    "tests/cells/test_validate.py": 18,  # many short tests, none in the top 60: the old figure's order kept
    "tests/unit/test_report_html.py": 18,  # the same
    "tests/cells/test_contestants_cpu_cells.py": 17,
    "tests/cells/test_kernels_model_ops_h200.py": 17,
    "tests/cells/test_compile_cache.py": 16,
    "tests/faults/test_text_injection.py": 16,
    "tests/faults/test_kernel_faults.py": 15,
    "tests/faults/test_address_faults.py": 14,
    "tests/unit/test_calibration.py": 13,
    "tests/faults/test_end_of_run_faults.py": 11,
    "tests/cells/test_worker_elementwise.py": 10,
    "tests/adversarial/test_adversarial_cpu.py": 8,
    "tests/cells/test_job_scratch.py": 7,
    "tests/unit/test_verdicts.py": 7,
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
