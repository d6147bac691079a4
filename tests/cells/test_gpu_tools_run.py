"""Issue 47's whole path on a CPU cell: `opmatrix run --profile ncu --sanitize` over the planted kernel
(tests/gpu_tools/kernels/doubled) completes, every row it ran says in one line why neither tool ran ("not run: no GPU
in this cell"), no row fails for it, and report.md lists each reason once under its section. The matrix keys
([run] profile, sanitize) reach the cell's settings as the flags do. The GPU half: matrix/h100-profile-sanitize.toml."""
from __future__ import annotations

import shutil
import textwrap
import uuid
from pathlib import Path

import pytest

from opmatrix import paths, plan
from opmatrix.core import status
from opmatrix.matrix import MatrixError, load_matrix
from tests.faults.harness import opmatrix, rows

PLANTED = Path(__file__).parent / "gpu_tools" / "kernels"
CPU_REASON = "not run: no GPU in this cell (a CPU cell)"

MATRIX = """
name = "gpu-tools-cpu"
backends = ["torch", "triton"]
[run]
timeout_s = 120
warmup_ms = 0
rep_ms = 5
rounds = 10
max_rounds = 10
burst_ms = 2
burst_warmup_ms = 0
compile_only = false
kernels_dir = "{kernels}"
{extra}
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
[[toolchain]]
name = "host"
system = true
[[kernel]]
name = "doubled"
workloads = {{ cpu = ["small"] }}
dtypes = {{ cpu = ["float32"] }}
"""


def write_matrix(root: Path, extra: str = "") -> Path:
    path = root / "m.toml"
    path.write_text(textwrap.dedent(MATRIX).format(kernels=PLANTED, extra=extra))
    return path


@pytest.mark.integration
def test_a_cpu_cell_says_why_neither_tool_ran_and_the_run_goes_on(tmp_path):
    run_id = f"gpu-tools-{uuid.uuid4().hex[:8]}"
    out = opmatrix("run", write_matrix(tmp_path), "--no-ray", "--run-id", run_id, "--reports", tmp_path / "reports",
                   "--profile", "ncu", "--sanitize", timeout=600, OPMATRIX_HTML="1")
    shutil.rmtree(paths.SCRATCH / run_id, ignore_errors=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    stored = {(r["backend"], r["variant"]): r for r in rows(tmp_path / "reports" / run_id)}
    assert set(stored) == {("torch", "default"), ("triton", "default"), ("triton", "past_end")}
    for key in (("torch", "default"), ("triton", "default")):  # the baseline (timed) and Triton's interpreter
        r = stored[key]
        assert r["status"] == status.OK, r["error"]
        assert (r["profile"], r["sanitizer"]) == (CPU_REASON, CPU_REASON)
        assert r["ncu_kernels"] == 0 and r["ncu_report"] == ""
    planted = stored[("triton", "past_end")]  # a GPU contestant: unsupported on the CPU, no tool asked of it
    assert planted["status"] == status.UNSUPPORTED and planted["profile"] == planted["sanitizer"] == ""
    report = (tmp_path / "reports" / run_id / "report.md").read_text()
    assert "## Profile (Nsight Compute)" in report and "## Sanitizer (compute-sanitizer)" in report
    assert f"- not profiled: 2 rows (cpu): {CPU_REASON}" in report
    assert f"- not sanitized: 2 rows (cpu): {CPU_REASON}" in report
    assert not (tmp_path / "reports" / run_id / "profiles").exists()  # nothing was profiled
    html = (tmp_path / "reports" / run_id / "report.html").read_text()
    assert "Profile (Nsight Compute)" in html and "not profiled: 2 rows (cpu)" in html


def test_the_matrix_keys_reach_the_cells_settings(tmp_path):
    asked = load_matrix(write_matrix(tmp_path, 'profile = "ncu"\nsanitize = true'))
    settings = plan.settings(asked)
    assert (settings.profile, settings.sanitize) == ("ncu", True)
    default = plan.settings(load_matrix(write_matrix(tmp_path)))
    assert (default.profile, default.sanitize) == ("none", False)
    with pytest.raises(MatrixError, match="run.profile"):
        load_matrix(write_matrix(tmp_path, 'profile = "nsys"'))


def test_the_gpu_matrix_profiles_and_sanitizes_the_planted_contestant():
    matrix = load_matrix(Path(__file__).resolve().parents[1] / "matrix" / "h100-profile-sanitize.toml")
    settings = plan.settings(matrix)
    assert (settings.profile, settings.sanitize) == ("ncu", True)
    jobs = [j for cell in plan.cell_plans(matrix, "check", Path("/tmp/opmatrix-plan-check")) for j in cell.jobs]
    assert ("doubled", "triton", "past_end") in {(j.kernel, j.backend, j.variant) for j in jobs}
    assert {(j.kernel, j.backend) for j in jobs} >= {("rmsnorm", "torch"), ("rmsnorm", "torch-compile"),
                                                     ("rmsnorm", "triton"), ("doubled", "torch")}
