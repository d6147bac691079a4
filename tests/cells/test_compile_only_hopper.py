"""Compile-only builds for Hopper (and their refusals elsewhere), each checked on its own, on this CPU host with the
real compilers and never run: CUTLASS's nvcc build of gemm_relu for an H200 through a real matrix cell (and its
refusal of an MI300X), TileLang's ws, two_rows and l2_prefetch and Triton's l2_prefetch variants, the FA3 flash
attention's refusal of other GPUs. Apart from test_compile_only_cells.py (the rest of the default matrix's fleet
rows, which leaves these out) so that `--dist loadfile` runs the two side by side."""
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

# The default-style matrix, CUTLASS's gemm_relu rows only (the rest: test_compile_only_cells.py).
ONLY_CUTLASS = "".join(f"""
[[exclude]]
{key} = "{value}"
reason = "test_compile_only_cells.py builds it"
""" for key, value in (("kernel", "rmsnorm"), ("kernel", "flash_attention"), ("backend", "torch"),
                       ("backend", "torch-compile"), ("backend", "tilelang"), ("backend", "triton")))


def test_cutlass_is_built_by_nvcc_for_hopper_and_refuses_amd(tmp_path):
    """CUTLASS's rows of the default-style matrix for the fleet devices (moved here from test_compile_only_cells.py):
    nvcc builds the sm_90a library on this host (never run); AMD needs another implementation."""
    run_dir, full = run_default_style(tmp_path, ["h200", "mi300x"], ONLY_CUTLASS)
    got = {(r.device, r.backend, r.variant): r for r in full.itertuples()}
    assert sorted(got) == [("h200", "cutlass", "default"), ("mi300x", "cutlass", "default")]
    assert got[("h200", "cutlass", "default")].status == "compiles"
    assert "sm_90a cubin" in got[("h200", "cutlass", "default")].error
    assert "registers" in json.loads(got[("h200", "cutlass", "default")].config)  # ptxas' report of the build
    assert got[("mi300x", "cutlass", "default")].status == "unsupported"
    assert "NVIDIA-only" in got[("mi300x", "cutlass", "default")].error


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
