"""Issue 47's whole path on a CPU cell: `opmatrix run --profile ncu --sanitize` over the planted kernel
(tests/gpu_tools/kernels/doubled, through tests/gpu_tool_matrix.py) completes, every row it ran says in one line why
neither tool ran ("not run: no GPU in this cell"), no row fails for it, and report.md lists each reason once under
its section. The matrix keys ([run] profile, sanitize), without a run: tests/unit/test_gpu_tools_run.py. The GPU
half: matrix/h100-profile-sanitize.toml."""
from __future__ import annotations

import shutil
import uuid

import pytest

from opmatrix import paths
from opmatrix.core import status
from tests.faults.harness import opmatrix, rows
from tests.gpu_tool_matrix import planted_matrix

CPU_REASON = "not run: no GPU in this cell (a CPU cell)"


@pytest.mark.integration
def test_a_cpu_cell_says_why_neither_tool_ran_and_the_run_goes_on(tmp_path):
    run_id = f"gpu-tools-{uuid.uuid4().hex[:8]}"
    out = opmatrix("run", planted_matrix(tmp_path), "--no-ray", "--run-id", run_id, "--reports", tmp_path / "reports",
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
