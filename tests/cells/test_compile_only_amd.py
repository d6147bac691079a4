"""Compile-only builds for AMD GPUs on this CPU host: TileLang's HIP source compiled by the distribution's clang
(opmatrix.kit.amdgcn) into code objects for gfx942 (MI300X) and gfx90a (MI250X), read back (size, MFMA
instructions, the compiler's resource report) and never run.

The compiler comes from the system (Debian's clang-22, lld-22 and llvm-22, installed by .ci/run); HIP's headers and
device libraries from the Triton wheel of the test environment. Without them the builds are skipped with the reason,
except under CI (CI=true), where they fail: a compile-only test that silently skips in CI proves nothing. Reading
clang's resource report without a build: tests/unit/test_compile_only_amd.py."""
import os
import re

import pytest

from opmatrix import paths
from opmatrix.core.jobs import DeviceInfo
from opmatrix.incell import plugins
from opmatrix.kit import amdgcn

MI300X = DeviceInfo("mi300x", "amd", "gfx942", "MI300X")
MI250X = DeviceInfo("mi250x", "amd", "gfx90a", "MI250X")


@pytest.fixture(scope="module")
def toolchain():
    absent = amdgcn.missing()
    if absent:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {absent}")
        pytest.skip(absent)


def _impl(kernel: str):
    return (plugins.load_impl(paths.BUILTIN_KERNELS, kernel, "tilelang"),
            plugins.load_spec(paths.BUILTIN_KERNELS, kernel).WORKLOADS)


@pytest.mark.integration
@pytest.mark.parametrize("device", [MI300X, MI250X], ids=lambda d: d.arch)
def test_tilelang_builds_code_objects_for_cdna_with_mfma_and_the_compilers_report(toolchain, device):
    """gemm_relu's `tile` kernel and rmsnorm's `default`, bf16, built for the arch: compiles, with the object's size,
    its v_mfma count (the gemm's T.gemm is MFMA; rmsnorm has none) and registers from clang's resource report, in
    the row's text and its config."""
    tl, workloads = _impl("gemm_relu")
    gemm = tl.compile_for(workloads["ragged_4097"], "bfloat16", device, "tile")
    facts = gemm.config
    assert gemm.status == "compiles", gemm
    assert facts["target"] == {"kind": "hip", "mcpu": device.arch}
    assert facts["mfma"] > 0 and facts["code_object_bytes"] > 0, facts
    assert 0 < facts["vgprs"] <= 512 and facts["sgprs"] > 0 and facts["occupancy"] >= 1, facts
    assert facts["lds_bytes"] == (128 * 64 + 64 * 256) * 2  # the A and B tiles, launched as dynamic LDS
    assert facts["compiler"].startswith(f"clang {amdgcn.LLVM}.")
    assert re.match(rf"{device.arch} code object by clang {amdgcn.LLVM}\.\S+ using MFMA \({facts['mfma']} v_mfma\), "
                    rf"{facts['vgprs']} VGPRs, \d+ AGPRs, {facts['sgprs']} SGPRs, 49152 bytes of LDS, no spills, "
                    rf"occupancy \d+ waves/SIMD \({facts['code_object_bytes']} bytes\)$", gemm.what), gemm.what

    tl, workloads = _impl("rmsnorm")
    norm = tl.compile_for(workloads["odd_5120"], "bfloat16", device, "default")
    facts = norm.config
    assert norm.status == "compiles", norm
    assert facts["mfma"] == 0 and facts["code_object_bytes"] > 0 and facts["vgprs"] > 0, facts
    assert facts["lds_bytes"] > 0  # T.reduce_sum's workspace across the block's waves
    assert f"{device.arch} code object by clang" in norm.what and "v_mfma" not in norm.what, norm.what


@pytest.mark.integration
def test_tilelang_flash_attention_fits_a_cdna_workgroups_lds(toolchain):
    """flash attention's `fixed` kernel at its Hopper blocks (128x64) took 67,584 bytes of LDS for gfx942, past the
    65,536 a workgroup may have (reports/20261207-cpu-gfx942-builds): on AMD it builds 64x64 blocks, which fit, and
    the row's text would name an overflow."""
    tl, workloads = _impl("flash_attention")
    flash = tl.compile_for(workloads["b8_h32_s4096_d128_causal"], "bfloat16", MI300X, "fixed")
    facts = flash.config
    assert flash.status == "compiles" and facts["block_M"] == 64 and facts["mfma"] > 0, flash
    assert facts["lds_bytes"] <= facts["lds_limit_bytes"] == 65536 and "would not launch" not in flash.what, flash


@pytest.mark.integration
def test_without_the_compiler_the_row_lowers_and_says_what_is_missing(monkeypatch):
    """No clang-22 here: the row is the HIP source (lowers), with one line naming what is missing and how to get
    it."""
    monkeypatch.setattr(amdgcn, "_tool", lambda name: None)
    tl, workloads = _impl("gemm_relu")
    lowered = tl.compile_for(workloads["ragged_4097"], "bfloat16", MI300X, "tile")
    assert lowered.status == "lowers"
    assert re.fullmatch(r"HIP source for gfx942 \(\d+ chars\); no clang-22, ld\.lld-22, llvm-objdump-22 here for a "
                        r"code object: apt-get install --no-install-recommends clang-22 lld-22 llvm-22 .*",
                        lowered.what), lowered.what
    assert "\n" not in lowered.what
