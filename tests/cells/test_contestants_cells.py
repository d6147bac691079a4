"""Issue 31's contestants in real nox cell environments on this CPU host: each cell layers the contestant's packages
over this test environment's torch and Triton (system = true) through the matrix machinery, imports them in the
cell, and builds for devices no host has. Install cost, measured on the 2-core machine (pip from the package
index): cuda-tile + nvidia-cuda-tileiras ~10 s; nvidia-cutlass-dsl + quack-kernels + flash-attn-4 ~25 s (~500 MB).
CuTe DSL: one cell for our rmsnorm, gemm_relu and flash attention (the last for the H200 and the B200), quack's
RMSNorm and FlashAttention 4. Helion and Liger on the CPU: test_contestants_cpu_cells.py (its own file, so
pytest-xdist runs it beside this one).
cuTile (cuda-tile + tileiras): test_contestants_flash_attention.py, one cell for its rmsnorm, gemm_relu and flash
attention and Gluon's flash attention (one environment, one cell runner).
FlashInfer (~850 MB, ~170 s to install) is left to the committed run reports/20261202-cpu-contestants, whose rows
tests/unit/test_contestants_run.py reads from disk."""
import re

import pytest

from opmatrix import paths
from opmatrix.incell import plugins
from opmatrix.incell.plugins import Unsupported
from tests.contestants import CPU, H200, MI300X, by_key, run_layered

pytestmark = pytest.mark.integration

# the B200 builds our CuTe DSL flash attention alone (rmsnorm, gemm_relu and FA4 are read on the H200)
CUTE_B200_FLASH_ONLY = """
[[exclude]]
device = "b200"
kernel = "rmsnorm"
[[exclude]]
device = "b200"
kernel = "gemm_relu"
[[exclude]]
device = "b200"
backend = "flash-attn"
"""


def test_cute_dsl_quack_and_flash_attention_4_build_hopper_cubins_in_one_cell(tmp_path):
    df = run_layered(tmp_path, "cute", ["h200", "b200"],
              ["nvidia-cutlass-dsl==4.8.1", "quack-kernels==0.6.5", "flash-attn-4==4.0.0b36"],
              {"rmsnorm": (["cute-dsl", "quack"], {"nvidia": "odd_5120"}, {"nvidia": "bfloat16"}),
               "gemm_relu": (["cute-dsl"], {"nvidia": "ragged_4097"}, {"nvidia": "bfloat16"}),
               "flash_attention": (["flash-attn", "cute-dsl"], {"nvidia": "b1_h32_s8192_d128_causal"},
                                   {"nvidia": "bfloat16"})},
              CUTE_B200_FLASH_ONLY)
    rows = by_key(df)
    assert {(k, d) for k, _, d, _ in rows if d == "b200"} == {("flash_attention", "b200")}
    for device, arch in (("h200", "sm_90a"), ("b200", "sm_100a")):  # kernels/flash_attention/cute_dsl.py
        ours = rows[("flash_attention", "cute-dsl", device, "default")]
        assert ours.status == "compiles" and ours.backend_version == "4.8.1", ours.error
        assert f"{arch} cubin by CuTe DSL" in ours.error, ours.error  # the arch from the cubin's ELF header
        assert int(re.search(r"\((\d+) bytes\)", ours.error).group(1)) > 0
    assert rows[("rmsnorm", "cute-dsl", "h200", "default")].status == "compiles"
    assert "sm_90a cubin by CuTe DSL" in rows[("rmsnorm", "cute-dsl", "h200", "default")].error
    assert rows[("rmsnorm", "quack", "h200", "default")].backend_version == "0.6.5"
    assert "sm_90a cubin by quack" in rows[("rmsnorm", "quack", "h200", "default")].error
    assert rows[("rmsnorm", "cute-dsl", "h200", "default")].backend_version == "4.8.1"
    ragged = rows[("gemm_relu", "cute-dsl", "h200", "default")]
    assert ragged.status == "unsupported" and "no edge predication" in ragged.error  # a gap stays visible
    fa4 = rows[("flash_attention", "flash-attn", "h200", "default")]
    assert fa4.status == "compiles" and fa4.backend_version == "4.0.0b36", fa4.error
    assert "sm_90a cubin of FlashAttention 4's FlashAttentionForwardSm90 using wgmma" in fa4.error


def test_the_cute_dsl_flash_attention_refuses_what_it_does_not_cover():
    """Refused before CuTe DSL is imported: no cell, no package."""
    ours = plugins.load_impl(paths.BUILTIN_KERNELS, "flash_attention", "cute-dsl")
    causal = plugins.load_spec(paths.BUILTIN_KERNELS, "flash_attention").WORKLOADS["b8_h32_s4096_d128_causal"]
    for workload, dtype, device, reason in ((causal, "float32", H200, "16-bit inputs"),
                                            (dict(causal, head_dim=256), "bfloat16", H200, "head_dim 256"),
                                            (causal, "bfloat16", MI300X, "NVIDIA-only"),
                                            (causal, "bfloat16", CPU, "NVIDIA GPUs only")):
        with pytest.raises(Unsupported, match=reason):
            ours.compile_for(workload, dtype, device, "default")
