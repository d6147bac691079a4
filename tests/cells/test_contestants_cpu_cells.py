"""Helion and Liger-Kernel on this CPU host in a real nox cell (their packages layered over this test environment's
torch and Triton; helion brings scikit-learn: ~30 s to install): Helion's interpret mode checks its rmsnorm against
fp64 (correctness only, never timed), and the rows that cannot run say why. gemm_relu's Helion `tuned` is left
out: no assertion reads it (its `default` row shows why Helion's gemm cannot run on the CPU)."""
import pytest

from tests.contestants import by_key, run_layered

pytestmark = pytest.mark.integration


def test_helion_runs_in_interpret_mode_on_the_cpu_and_liger_says_why_it_cannot(tmp_path):
    df = run_layered(tmp_path, "cpu-libs", ["cpu"], ["helion==1.5.1", "liger-kernel==0.8.5"],
                      {"rmsnorm": (["helion", "liger"], {"cpu": "ragged_1000"}, {"cpu": "float32"}),
                       "gemm_relu": (["helion"], {"cpu": "tiny_ragged"}, {"cpu": "float32"})},
                     '[[exclude]]\nkernel = "gemm_relu"\nvariant = "tuned"\n')
    rows = by_key(df)
    helion = rows[("rmsnorm", "helion", "cpu", "default")]
    assert helion.status == "ok" and helion.rel_err < helion.tolerance and helion.backend_version == "1.5.1"
    assert helion.median_ms != helion.median_ms  # interpret mode: correctness only, never timed (NaN)
    assert rows[("rmsnorm", "helion", "cpu", "tuned")].status == "unsupported"
    assert "aten::mm.dtype" in rows[("gemm_relu", "helion", "cpu", "default")].error
    liger = rows[("rmsnorm", "liger", "cpu", "default")]
    assert liger.status == "unsupported" and "Triton's interpreter" in liger.error and liger.backend_version == "0.8.5"
