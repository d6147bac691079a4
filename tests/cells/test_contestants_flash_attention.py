"""Issue 31's tile DSLs, cuTile and Gluon, built on this CPU host for devices no host has, in one real nox cell that
layers cuda-tile and tileiras over this test environment (Triton 3.9 carries Gluon): cuTile's rmsnorm and gemm_relu
as sm_100 cubins, and the flash attentions of kernels/flash_attention/cutile.py and gluon.py as an sm_90 and an
sm_100 cubin each, the arch read from the binary (one environment and one cell runner for all of them: the cuTile
rmsnorm and gemm_relu test was test_contestants_cells.py's, with its own cell over the same packages). Gluon's ragged
and non-causal paths and its Hopper `wgmma` variant compile too; what the kernels do not cover is refused with the
reason (without a build: tests/unit/test_contestants_flash_attention.py). Their numerics need a GPU: neither DSL has a
CPU mode, so no row here is `ok`."""
import json
import re

import pytest

from tests.contestants import B200, FLASH_WORKLOADS as WORKLOADS, H200, by_key, flash_attention, run_layered

TILE_PACKAGES = ["cuda-tile==1.7.0", "nvidia-cuda-tileiras==13.5.37"]
# cuTile's rmsnorm and gemm_relu are asked of the B200 alone (the one the test reads)
B200_ONLY = """
[[exclude]]
device = "h200"
kernel = "rmsnorm"
[[exclude]]
device = "h200"
kernel = "gemm_relu"
"""


@pytest.fixture(scope="module")
def tile_rows(tmp_path_factory):
    """One cell over cuda-tile + tileiras for the H200 and the B200: cuTile's rmsnorm and gemm_relu (B200), cuTile's
    and Gluon's flash attention (both)."""
    df = run_layered(tmp_path_factory.mktemp("tile-dsl"), "tile-dsl", ["h200", "b200"], TILE_PACKAGES,
                     {"rmsnorm": (["cutile"], {"nvidia": "odd_5120"}, {"nvidia": "bfloat16"}),
                      "gemm_relu": (["cutile"], {"nvidia": "square_4096"}, {"nvidia": "bfloat16"}),
                      "flash_attention": (["cutile", "gluon"], {"nvidia": "b8_h32_s4096_d128_causal"},
                                          {"nvidia": "bfloat16"})}, B200_ONLY)
    return by_key(df)


@pytest.mark.integration
def test_cutile_kernels_become_blackwell_cubins_in_a_cell_that_imports_cuda_tile(tile_rows):
    rows = tile_rows
    assert not [key for key in rows if key[0] != "flash_attention" and key[2] == "h200"]  # B200_ONLY
    for kernel in ("rmsnorm", "gemm_relu"):
        row = rows[(kernel, "cutile", "b200", "default")]
        assert row.status == "compiles" and "sm_100 cubin by tileiras" in row.error, row.error
        assert row.backend_version == "1.7.0"  # the version imported in the cell, not the driver's
        config = json.loads(row.config)
        assert config["cubin_bytes"] > 0 and config["registers"] > 0
    assert "using tcgen05" in rows[("gemm_relu", "cutile", "b200", "default")].error


@pytest.mark.integration
def test_cutile_and_gluon_flash_attention_become_hopper_and_blackwell_cubins_in_a_cell(tile_rows):
    rows = tile_rows
    for device, arch, mma in (("h200", "sm_90", "wgmma"), ("b200", "sm_100", "tcgen05")):
        tile = rows[("flash_attention", "cutile", device, "default")]
        assert tile.status == "compiles" and f"{arch} cubin by tileiras using {mma}" in tile.error, tile.error
        config = json.loads(tile.config)
        assert config["cubin_bytes"] > 0 and config["registers"] > 0 and tile.backend_version == "1.7.0"
        gluon = rows[("flash_attention", "gluon", device, "default")]
        assert gluon.status == "compiles" and f": {arch} cubin, " in gluon.error, gluon.error
        assert int(re.search(r"\((\d+) bytes\)", gluon.error).group(1)) > 0 and "registers" in gluon.error
        assert gluon.backend_version == "3.9.0"
    hopper = rows[("flash_attention", "gluon", "h200", "wgmma")]
    assert hopper.status == "compiles" and ": sm_90 cubin using wgmma, " in hopper.error, hopper.error
    blackwell = rows[("flash_attention", "gluon", "b200", "wgmma")]
    assert blackwell.status == "unsupported" and "sm_90 only" in blackwell.error, blackwell.error


@pytest.mark.integration
def test_gluon_flash_attention_compiles_its_ragged_and_non_causal_paths():
    gluon = flash_attention("gluon")
    for name in ("b1_h2_s127_d64_causal", "b1_h32_s8192_d128"):
        for device, variant, arch in ((H200, "default", "sm_90 cubin"), (B200, "default", "sm_100 cubin"),
                                      (H200, "wgmma", "sm_90 cubin using wgmma")):
            built = gluon.compile_for(WORKLOADS[name], "float16", device, variant)
            assert built.status == "compiles" and built.what.startswith(arch), built.what  # no registers: cached
            assert built.config["EVEN"] == (name == "b1_h32_s8192_d128")  # 127 rows: masked loads and stores
