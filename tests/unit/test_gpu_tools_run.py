"""Issue 47's matrix keys, without a run: [run] profile and sanitize reach the cell's settings as the flags do (an
unknown profiler refused when the matrix loads), and the GPU matrix (matrix/h100-profile-sanitize.toml) profiles and
sanitizes the planted contestant beside the shipped kernels. The whole path on a CPU cell:
tests/cells/test_gpu_tools_run.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from opmatrix import plan
from opmatrix.matrix import MatrixError, load_matrix
from tests.gpu_tool_matrix import planted_matrix
from tests.helpers import REPO


def test_the_matrix_keys_reach_the_cells_settings(tmp_path):
    asked = load_matrix(planted_matrix(tmp_path, 'profile = "ncu"\nsanitize = true'))
    settings = plan.settings(asked)
    assert (settings.profile, settings.sanitize) == ("ncu", True)
    default = plan.settings(load_matrix(planted_matrix(tmp_path)))
    assert (default.profile, default.sanitize) == ("none", False)
    with pytest.raises(MatrixError, match="run.profile"):
        load_matrix(planted_matrix(tmp_path, 'profile = "nsys"'))


def test_the_gpu_matrix_profiles_and_sanitizes_the_planted_contestant():
    matrix = load_matrix(REPO / "matrix" / "h100-profile-sanitize.toml")
    settings = plan.settings(matrix)
    assert (settings.profile, settings.sanitize) == ("ncu", True)
    jobs = [j for cell in plan.cell_plans(matrix, "check", Path("/tmp/opmatrix-plan-check")) for j in cell.jobs]
    assert ("doubled", "triton", "past_end") in {(j.kernel, j.backend, j.variant) for j in jobs}
    assert {(j.kernel, j.backend) for j in jobs} >= {("rmsnorm", "torch"), ("rmsnorm", "torch-compile"),
                                                     ("rmsnorm", "triton"), ("doubled", "torch")}
