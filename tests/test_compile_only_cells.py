"""Compile-only coverage on a CPU host: the default matrix's fleet devices (an H200, an MI300X), which no host here
has. Each GPU job is still a row; where the implementation can build for the device, it is built on this CPU host
with the real compilers (compiles: a binary, CUTLASS by nvcc included; lowers: device source only) and never run.
The CPU half of the same matrix: test_default_style_cpu.py."""
import json
import re

import pytest

from opmatrix import paths
from opmatrix.core.jobs import DeviceInfo
from opmatrix.incell import plugins
from opmatrix.incell.plugins import Unsupported
from tests.helpers import run_default_style, tilelang_cache_off

pytestmark = pytest.mark.integration
# compile-only targets: no such GPU on this host
H200 = DeviceInfo("h200", "nvidia", "sm_90", "H200")
A100 = DeviceInfo("a100", "nvidia", "sm_80", "A100")
MI300X = DeviceInfo("mi300x", "amd", "gfx942", "MI300X")


# Built by the tests below, one build each, with what they check of it: not built again by the matrix run.
BUILT_BELOW = """
[[exclude]]
device = "h200"
kernel = "rmsnorm"
backend = "triton"
variant = "l2_prefetch"
reason = "test_the_triton_l2_prefetch_rmsnorm_builds_for_hopper_and_refuses_rows_a_bulk_prefetch_cannot_move"
"""


def test_fleet_devices_are_built_for_on_this_host_and_never_run(tmp_path):
    """The default-style matrix for the fleet devices. Not built here (helpers.DEFAULT_STYLE's excludes and
    BUILT_BELOW): rmsnorm's TileLang two_rows and l2_prefetch and Triton l2_prefetch for sm_90, each built and
    checked by its own test below."""
    run_dir, full = run_default_style(tmp_path, ["h200", "mi300x"], BUILT_BELOW)
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
        assert len(df[df.device == device]) == 8
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
    assert got[("mi300x", "tilelang", "tile")].status == "lowers"  # HIP source; no hipcc here for a binary
    # CUTLASS: nvcc builds the sm_90a library here (never run); AMD needs another implementation.
    assert got[("h200", "cutlass", "default")].status == "compiles"
    assert "sm_90a cubin" in got[("h200", "cutlass", "default")].error
    assert "registers" in json.loads(got[("h200", "cutlass", "default")].config)  # ptxas' report of the build
    assert "NVIDIA-only" in got[("mi300x", "cutlass", "default")].error
    assert "gfx942 hsaco" in got[("mi300x", "triton", "default")].error
    report = (run_dir / "report.md").read_text()
    for section in ("## Coverage", "## Not run, unsupported or failed"):
        assert section in report
    coverage_row = re.search(r"^\| gemm_relu +\| tilelang\[tile\] +\|(.*)\|$", report, re.MULTILINE)
    assert [c.strip() for c in coverage_row.group(1).split("|")] == ["compiles", "lowers"]


def test_the_fa3_flash_attention_refuses_a_gpu_that_is_not_hopper():
    tl = plugins.load_impl(paths.BUILTIN_KERNELS, "flash_attention", "tilelang")
    workload = plugins.load_spec(paths.BUILTIN_KERNELS, "flash_attention").WORKLOADS["b1_h2_s127_d64_causal"]
    for device in (MI300X, DeviceInfo("b200", "nvidia", "sm_100", "B200")):
        for variant in ("fa3", "tuned"):
            with pytest.raises(Unsupported, match="written for Hopper"):
                tl.compile_for(workload, "float16", device, variant)


def test_the_ws_gemm_builds_for_partial_tiles_and_refuses_rows_tma_cannot_copy():
    """`ws` moves A, B and C by TMA: partial tiles at every edge build (TMA zero-fills and clips; the H200 run's
    partial_tiles rows check the values), rows that are not 16-byte multiples are refused with the reason."""
    tl = plugins.load_impl(paths.BUILTIN_KERNELS, "gemm_relu", "tilelang")
    workloads = plugins.load_spec(paths.BUILTIN_KERNELS, "gemm_relu").WORKLOADS
    with tilelang_cache_off():  # a cached binary would come without ptxas' report
        built = tl.compile_for(workloads["partial_tiles"], "bfloat16", H200, "ws")
    assert built.status == "compiles" and "TMA loads, TMA stores, setmaxnreg" in built.what, built.what
    assert re.search(r"setmaxnreg, \d+ registers, no spills \(", built.what), built.what
    with pytest.raises(Unsupported, match="16-byte row strides: K=4096 and N=4095"):
        tl.compile_for(workloads["ragged_4097"], "float16", H200, "ws")
    assert tl.compile_for(workloads["ragged_4097"], "float16", H200, "tile").status == "compiles"


def test_the_two_row_rmsnorm_builds_for_an_odd_token_count_and_guards_the_missing_row():
    """`two_rows` gives a program two rows: at odd_5120 (16383 tokens) the last program has one. Its loads and
    stores must be guarded by the row index, or it would write past y (the H200 run's fp64 check of y cannot see a
    write beyond it)."""
    import tilelang

    tl = plugins.load_impl(paths.BUILTIN_KERNELS, "rmsnorm", "tilelang")
    workload = plugins.load_spec(paths.BUILTIN_KERNELS, "rmsnorm").WORKLOADS["odd_5120"]
    with tilelang_cache_off():
        built = tl.compile_for(workload, "bfloat16", H200, "two_rows")
        assert built.status == "compiles" and built.config["block_rows"] == 2, built
        assert re.search(r"\d+ registers, no spills", built.what), built.what
        func = tl._kernel(workload["tokens"], workload["hidden"], "bfloat16", built.config["block_rows"],
                          built.config["threads"])
        source = tilelang.compile(func, target=built.config["target"]).get_kernel_source()
    stores = [line for line in source.splitlines() if "(Y + " in line]
    guards = re.findall(r"if \(+\(*\(\(int\)blockIdx\.x\) \* 2\) \+ .*?< 16383\)", source)
    assert stores and len(guards) >= 2, source  # the load of x and the store of y each check the row


def test_the_l2_prefetch_rmsnorm_prefetches_a_row_ahead_on_hopper_and_refuses_other_gpus():
    """`l2_prefetch`: each program asks the TMA unit for one bulk L2 prefetch of the row 3 x SMs programs ahead
    (132 SMs for a compile-only sm_90 build), and the last programs prefetch nothing past x (the kernel's guard;
    TileLang 0.1.15 also bounds the access itself). Hopper and later only (cp.async.bulk); an A100 or an MI300X is
    refused with the reason and `default` named."""
    import tilelang

    tl = plugins.load_impl(paths.BUILTIN_KERNELS, "rmsnorm", "tilelang")
    workload = plugins.load_spec(paths.BUILTIN_KERNELS, "rmsnorm").WORKLOADS["odd_5120"]
    with tilelang_cache_off():
        built = tl.compile_for(workload, "float16", H200, "l2_prefetch")
        assert built.status == "compiles" and built.config["prefetch_ahead"] == 3 * 132, built
        assert re.search(r"\d+ registers, no spills", built.what), built.what
        config = {key: value for key, value in built.config.items() if key != "target"}
        source = tilelang.compile(tl._kernel(workload["tokens"], workload["hidden"], "float16", **config),
                                  target=built.config["target"]).get_kernel_source()
    assert "cp.async.bulk.prefetch.L2.global" in source
    call = re.search(r"if \((.*)\) \{\n\s*l2_prefetch_bulk\(.*X\[.*\+ 2027520\)\]\)\), 10240\);", source)
    assert call and "< 15987" in call.group(1), source  # 16383 rows - 396 ahead: the row exists
    for device in (A100, MI300X):
        with pytest.raises(Unsupported, match="bulk L2 prefetch .* `default` is the portable kernel"):
            tl.compile_for(workload, "float16", device, "l2_prefetch")


def test_the_triton_l2_prefetch_rmsnorm_builds_for_hopper_and_refuses_rows_a_bulk_prefetch_cannot_move():
    """Triton's `l2_prefetch` (the same prefetch as TileLang's, inline PTX from the first thread): a cubin for
    sm_90 with the prefetch 3 x 132 programs ahead; refused on an A100 and an MI300X (whose `default` still builds),
    and for a row that is not a whole number of 16-byte units (cp.async.bulk moves 16-byte units)."""
    tr = plugins.load_impl(paths.BUILTIN_KERNELS, "rmsnorm", "triton")
    workloads = plugins.load_spec(paths.BUILTIN_KERNELS, "rmsnorm").WORKLOADS
    built = tr.compile_for(workloads["odd_5120"], "bfloat16", H200, "l2_prefetch")
    assert built.status == "compiles" and "sm_90 cubin" in built.what and built.config["AHEAD"] == 3 * 132, built
    assert tr.compile_for(workloads["odd_5120"], "bfloat16", H200, "default").config["AHEAD"] == 0
    for device in (A100, MI300X):
        with pytest.raises(Unsupported, match="bulk L2 prefetch .* `default` is the portable kernel"):
            tr.compile_for(workloads["llama_4096"], "float16", device, "l2_prefetch")
    assert "gfx942 hsaco" in tr.compile_for(workloads["llama_4096"], "float16", MI300X, "default").what
    with pytest.raises(Unsupported, match="a row of 1001 float16 is 2002 bytes"):
        tr.compile_for({"tokens": 67, "hidden": 1001}, "float16", H200, "l2_prefetch")
