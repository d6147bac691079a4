"""Compile-only coverage on a CPU host: the default matrix's fleet devices (an H200, an MI300X), which no host here
has. Each GPU job is still a row; where the implementation can build for the device, it is built on this CPU host
with the real compilers (compiles: a binary; lowers: device source only) and never run.
The CPU half of the same matrix: test_default_style_cpu.py. CUTLASS's rows (its nvcc build for sm_90a, 29 s, and
its refusal of the MI300X) and the Hopper variants' own build tests: test_compile_only_hopper.py, so that
`--dist loadfile` runs the two halves side by side."""
import re

import pytest

from opmatrix.kit import amdgcn
from tests.helpers import run_default_style

pytestmark = pytest.mark.integration

# Built and checked by test_compile_only_hopper.py, one build each: not built again by this matrix run.
BUILT_THERE = """
[[exclude]]
device = "h200"
kernel = "rmsnorm"
backend = "triton"
variant = "l2_prefetch"
reason = "test_compile_only_hopper.py: test_the_triton_l2_prefetch_rmsnorm_builds_for_hopper_and_refuses_rows..."
[[exclude]]
kernel = "gemm_relu"
backend = "cutlass"
reason = "test_compile_only_hopper.py: test_cutlass_is_built_by_nvcc_for_hopper_and_refuses_amd (both devices)"
"""


def test_fleet_devices_are_built_for_on_this_host_and_never_run(tmp_path):
    """The default-style matrix for the fleet devices. Not built here (helpers.DEFAULT_STYLE's excludes and
    BUILT_THERE): rmsnorm's TileLang two_rows and l2_prefetch and Triton l2_prefetch for sm_90, and gemm_relu's
    CUTLASS rows (8 gemm_relu rows a device with them, 7 here), each built and checked in
    test_compile_only_hopper.py."""
    run_dir, full = run_default_style(tmp_path, ["h200", "mi300x"], BUILT_THERE)
    norm = {(r.device, r.backend, r.variant): r for r in full[full.kernel == "rmsnorm"].itertuples()}
    assert norm[("h200", "tilelang", "default")].status == "compiles"
    assert norm[("h200", "triton", "default")].status == "compiles"
    assert norm[("h200", "torch", "default")].status == "no_host"
    attn = {(r.device, r.backend, r.variant): r for r in full[full.kernel == "flash_attention"].itertuples()}
    assert attn[("h200", "triton", "default")].status == "compiles"
    assert attn[("h200", "tilelang", "fixed")].status == "compiles"
    assert "sm_90a binary using wgmma" in attn[("h200", "tilelang", "fixed")].error
    # issue 14's FA3 design: its warp roles written out, O stored by TMA, and ptxas keeps its wgmmas asynchronous
    # (no C7514), else the softmax would not run under P V
    fa3 = attn[("h200", "tilelang", "fa3")]
    assert fa3.status == "compiles" and "TMA loads, TMA stores, setmaxnreg" in fa3.error, fa3.error
    assert re.search(r"setmaxnreg, \d+ registers, no spills \(", fa3.error), fa3.error
    df = full[full.kernel == "gemm_relu"]
    got = {(r.device, r.backend, r.variant): r for r in df.itertuples()}
    for device in ("h200", "mi300x"):
        assert len(df[df.device == device]) == 7  # and CUTLASS's row: test_compile_only_hopper.py
        assert got[(device, "torch", "default")].status == "no_host"
        assert got[(device, "torch-compile", "default")].status == "no_host"
        assert got[(device, "tilelang", "cpu")].status == "unsupported"
        assert got[(device, "triton", "default")].status == "compiles"
        assert got[(device, "triton", "default")].median_ms != got[(device, "triton", "default")].median_ms  # NaN
    assert "sm_90a binary using wgmma" in got[("h200", "tilelang", "tile")].error
    assert got[("h200", "tilelang", "tile")].status == "compiles"
    assert got[("h200", "tilelang", "tuned")].status == "compiles"  # its source, at the fixed configuration
    # issue 14's persistent warp-specialised kernel: TMA both ways and the producer/consumer register split
    assert "sm_90a binary using wgmma, TMA loads, TMA stores, setmaxnreg" in got[("h200", "tilelang", "ws")].error
    # ptxas' report of the very nvcc run that built it (TileLang's cache is per job: cold, so nvcc ran): its
    # wgmmas stay asynchronous (no C7514), else one batch could not stay in flight while the next stage is awaited
    ws = got[("h200", "tilelang", "ws")].error
    assert re.search(r"setmaxnreg, \d+ registers, no spills \(", ws), ws
    assert got[("mi300x", "tilelang", "ws")].status == "unsupported"
    assert "sm_90 cubin using wgmma" in got[("h200", "triton", "default")].error
    assert re.search(r"wgmma, \d+ registers, (no spills|\d+ bytes spilled) \(", got[("h200", "triton", "default")].error)
    # a gfx942 code object where the distribution's clang-22 is here (test_compile_only_amd.py checks its figures and
    # fails under CI without it), else the HIP source, saying what is missing
    amd = "lowers" if amdgcn.missing() else "compiles"
    assert got[("mi300x", "tilelang", "tile")].status == amd, got[("mi300x", "tilelang", "tile")].error
    assert got[("mi300x", "tilelang", "tuned")].status == amd
    if amd == "compiles":
        assert re.search(r"gfx942 code object by clang \S+ using MFMA \(\d+ v_mfma\), \d+ VGPRs",
                         got[("mi300x", "tilelang", "tile")].error)
    assert "gfx942 hsaco" in got[("mi300x", "triton", "default")].error
    report = (run_dir / "report.md").read_text()
    for section in ("## Coverage", "## Not run, unsupported or failed"):
        assert section in report
    coverage_row = re.search(r"^\| gemm_relu +\| tilelang\[tile\] +\|(.*)\|$", report, re.MULTILINE)
    assert [c.strip() for c in coverage_row.group(1).split("|")] == ["compiles", amd]
