"""Issue 31's tile-DSL flash attentions, cuTile's and Gluon's (kernels/flash_attention/cutile.py and gluon.py), refuse
what they do not cover before anything is built or imported: tf32, AMD GPUs, a Hopper-only variant on Blackwell,
head_dim 256, and the CPU. Their builds in a real nox cell: tests/cells/test_contestants_flash_attention.py."""
import pytest

from opmatrix import paths
from opmatrix.incell import plugins
from opmatrix.incell.plugins import Unsupported
from tests.contestants import B200, CPU, FLASH_WORKLOADS as WORKLOADS, H200, MI300X, flash_attention


def test_the_tile_dsl_flash_attentions_refuse_what_they_do_not_cover():
    causal = WORKLOADS["b8_h32_s4096_d128_causal"]
    wide = dict(causal, head_dim=256)
    gluon, tile = flash_attention("gluon"), flash_attention("cutile")
    with pytest.raises(Unsupported, match="tf32"):
        gluon.compile_for(causal, "float32", H200, "default")
    with pytest.raises(Unsupported, match="MFMA"):
        gluon.compile_for(causal, "bfloat16", MI300X, "default")
    with pytest.raises(Unsupported, match="sm_90 only"):
        gluon.compile_for(causal, "bfloat16", B200, "wgmma")
    with pytest.raises(Unsupported, match="head_dim 256"):
        gluon.compile_for(wide, "bfloat16", B200, "default")
    with pytest.raises(Unsupported, match="head_dim 256"):
        tile.compile_for(wide, "bfloat16", H200, "default")  # refused before cuda.tile is imported
    assert "no CPU mode" in plugins.load_backend(paths.BUILTIN_BACKENDS, "gluon").covers(CPU)
    assert "NVIDIA GPUs only" in plugins.load_backend(paths.BUILTIN_BACKENDS, "cutile").covers(CPU)
