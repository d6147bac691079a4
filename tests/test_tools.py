"""The analysis tools behind the NOTES run on the committed runs and say what they claim to."""
import importlib.util
import re
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1] / "tools"


def tool(name: str):
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_aa_noise_separates_launch_bound_calls_from_device_bound_ones(capsys):
    assert tool("aa_noise").main(["20261130-h200-model"]) == 0
    lines = capsys.readouterr().out.splitlines()
    decode = next(line for line in lines if line.startswith("rope") and "llama_decode" in line)
    prefill = next(line for line in lines if line.startswith("rope") and "llama_prefill" in line)
    assert " launch " in decode and " device " in prefill  # 0.125 ms of host-side launches vs 0.48 ms of copies


def test_aa_noise_by_distance_buckets_every_paired_round(capsys):
    runs = ["20261130-h200-decide-a"]
    buckets = tool("aa_noise").by_distance(runs, "gemm_relu")
    assert buckets and all(values for values in buckets.values())
    tool("aa_noise").print_by_distance(runs, "gemm_relu")
    assert "slots apart" in capsys.readouterr().out


@pytest.mark.integration
def test_sm90_triton_gemm_configs_names_registers_and_spills(capsys, monkeypatch):
    module = tool("sm90_triton_gemm_configs")
    monkeypatch.setattr(module, "CONFIGS", module.CONFIGS[:1])  # the committed configuration only
    monkeypatch.setenv("TRITON_CACHE_DIR", "unused")  # the tool takes a cache of its own
    assert module.main(["float16"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert re.match(r"128x256x64, 8 warps, 3 stages: sm_90 cubin using wgmma, \d+ registers, "
                    r"(no spills|\d+ bytes spilled)", line), line


def test_share_of_ceiling_puts_every_rounded_report_figure_inside_its_interval(capsys):
    """The report prints rmsnorm's share of the copy ceiling rounded to a percent; the tool's per-round median and
    interval must agree with the row's stored GB/s, and the two-row TileLang variant is read by its label."""
    import pandas as pd

    from opmatrix import paths
    from opmatrix.store import load_run, run_dir

    run = "20261201-h200-rmsnorm-two-rows"
    assert tool("share_of_ceiling").main([run, "rmsnorm", "tilelang[two_rows]", "triton"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 8 and all("30 rounds" in line for line in lines)  # 2 workloads x 2 dtypes x 2 contestants
    df = load_run(run_dir(run, paths.REPORTS))
    for line in lines:
        workload, dtype, label, gbps = line.split()[:4]
        estimate, lo, hi = (float(v) for v in re.search(r"([\d.]+) % \[([\d.]+), ([\d.]+)\]", line).groups())
        assert lo <= estimate <= hi
        row = df[(df.workload == workload) & (df.dtype == dtype) & (df.backend == label.split("[")[0])
                 & (df.variant == (label.split("[")[1].rstrip("]") if "[" in label else "default"))].iloc[0]
        assert pd.notna(row.gbps) and abs(estimate - 100 * row.gbps / row.ceiling_gbps) < 0.5  # median of rounds
        assert int(gbps) == round(row.gbps)


def test_share_of_ceiling_refuses_a_kernel_the_run_has_not(capsys):
    assert tool("share_of_ceiling").main(["20261201-h200-rmsnorm-two-rows", "gemm_relu"]) == 2
    assert "no ok rows of gemm_relu" in capsys.readouterr().err


def test_sweep_rounds_visit_every_contestant_once_a_round_in_orders_that_vary_and_repeat():
    """The H200 sweeps' interleaved rounds (tools/h200_sweeps.py): times aligned by round, every contestant timed
    once per round, the order shuffled per round and the same on a rerun (what makes a drift hit all alike)."""
    sweeps = tool("h200_sweeps")
    visits = []

    def clock(fn):
        visits.append(fn())
        return float(len(visits))

    fns = {name: (lambda n=name: n) for name in "abcde"}
    times = sweeps.interleaved_rounds(fns, 6, clock)
    assert set(times) == set(fns) and all(len(t) == 6 for t in times.values())
    orders = [tuple(visits[5 * r:5 * r + 5]) for r in range(6)]
    assert all(sorted(order) == list("abcde") for order in orders) and len(set(orders)) > 1
    for r, order in enumerate(orders):  # a contestant's r-th time is the one taken in round r
        assert [times[name][r] for name in order] == [5 * r + k + 1.0 for k in range(5)]
    visits.clear()
    sweeps.interleaved_rounds(fns, 6, clock)
    assert [tuple(visits[5 * r:5 * r + 5]) for r in range(6)] == orders
    assert sweeps.H200.arch == "sm_90" and sweeps.H200.vendor == "nvidia"


def test_paired_against_names_the_rounds_each_interval_was_drawn_from(capsys):
    assert tool("paired_against").main(["20261201-h200-rmsnorm-two-rows", "rmsnorm", "tilelang",
                                        "tilelang[two_rows]"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4  # 2 workloads x 2 dtypes, only the named contestant
    assert all(re.search(r"tilelang\[two_rows\] vs tilelang: \d\.\d\dx \[\d\.\d\d, \d\.\d\d\] \(30 rounds\)$", line)
               for line in lines), lines


def test_rmsnorm_sweep_only_keeps_the_named_contestants_and_the_copy_it_divides_by(monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["h200_rmsnorm_sweep.py", "3", "--tilelang", "--only", "tma",
                                     "--only", "flat, 1024 per program, warps=4"])
    sweep = tool("h200_rmsnorm_sweep")
    assert (sweep.ROUNDS, sweep.TILELANG) == (3, True)
    assert sweep.wanted("tilelang tma threads=128") and sweep.wanted("copy: triton flat, 1024 per program, warps=4")
    assert sweep.wanted("copy: torch copy_ x->y")  # every ratio is taken against it
    assert not sweep.wanted("committed tilelang 256 threads") and not sweep.wanted("copy: triton flat, 1024 per "
                                                                                   "program, warps=2")
    monkeypatch.setattr("sys.argv", ["h200_rmsnorm_sweep.py", "--tilelang", "--onyl=tma"])
    with pytest.raises(SystemExit) as exit_:
        tool("h200_rmsnorm_sweep")
    assert exit_.value.code == 2 and "--onyl" in capsys.readouterr().err


@pytest.mark.integration
def test_rmsnorm_tilelang_designs_build_for_an_h200_with_the_cluster_slots_apart_from_the_workspace():
    """The sweep's TileLang designs (tools/h200_rmsnorm_tilelang.py) compile for sm_90a with real nvcc: the TMA
    kernel moves the row by one bulk load and one bulk store, and the cluster kernel's partial-sum slots do not share
    shared memory with the reduction's workspace (a peer's remote write would land in it: reports/
    20261201-h200-rmsnorm-tilelang/logs/sweep-cluster-race.txt)."""
    from tests.helpers import tilelang_cache_off

    designs = tool("h200_rmsnorm_tilelang")
    with tilelang_cache_off():
        tma = designs.tma_rmsnorm(16384, 4096, "bfloat16", 128).get_kernel_source()
        cluster = designs.cluster_rmsnorm(16384, 4096, "bfloat16", 2, 128).get_kernel_source()
    assert tma.count("tl::tma_load(") == 1 and tma.count("tl::tma_store(") == 1
    assert "map_shared_rank" in cluster and "cluster_sync" in cluster
    offsets = {name: int(at) for name, at in re.findall(r"void\* (\w+) = \(\(void\*\)\(\(char\*\)buf_dyn_shmem \+ (\d+)\)\)",
                                                        cluster)}
    assert offsets["slots"] + 4 * 2 <= offsets["workspace"] or offsets["workspace"] + 4 * 128 <= offsets["slots"], \
        offsets


@pytest.mark.integration
def test_the_pipelined_rmsnorm_design_is_warp_specialised_without_the_register_split_that_allows_one_cta_per_sm():
    """The sweep's persistent design (tools/h200_rmsnorm_tilelang.py pipelined_rmsnorm): TileLang turns its
    T.Pipelined row loop into a TMA producer warpgroup and consumers; its default register split (setmaxnreg 240 for
    the consumers) would leave room for one CTA per SM, so the design turns it off and compiles for `per_sm` CTAs."""
    from tests.helpers import tilelang_cache_off

    designs = tool("h200_rmsnorm_tilelang")
    with tilelang_cache_off():
        specialised = designs.pipelined_rmsnorm(16384, 4096, "float16", 132, 2, 256, 3).get_kernel_source()
        plain = designs.pipelined_rmsnorm(16384, 4096, "float16", 132, 4, 256, 2,
                                          specialised=False).get_kernel_source()
    assert specialised.count("tl::tma_load(") == 1 and "__launch_bounds__(384, 2)" in specialised
    assert "reg_alloc" not in specialised and "reg_dealloc" not in specialised
    assert "tl::tma_load(" not in plain and "cp_async" in plain and "__launch_bounds__(256, 4)" in plain


def test_suite_cpu_charges_a_test_its_childrens_cpu_and_sums_it_per_file(tmp_path, capsys):
    """tools/suite_cpu.py as a pytest plugin in a pytest of its own: a test that waits for a child burning CPU is
    charged that CPU; the summary lists the file with it."""
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "test_burn.py").write_text(
        "import subprocess, sys\n"
        "def test_burn():\n"
        "    subprocess.run([sys.executable, '-c', 'import time\\nt = time.process_time()\\n"
        "while time.process_time() - t < 0.5: pass'], check=True)\n"
        "def test_idle():\n"
        "    pass\n")
    out = tmp_path / "cpu.jsonl"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TOOLS), os.environ.get("PYTHONPATH", "")]),
               SUITE_CPU_OUT=str(out))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "suite_cpu", "-p", "no:cacheprovider",
                           "-p", "no:xdist", str(tmp_path / "test_burn.py")], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = {json.loads(line)["test"].split("::")[1]: json.loads(line) for line in out.read_text().splitlines()}
    assert lines["test_burn"]["children_cpu_s"] >= 0.45 and lines["test_idle"]["children_cpu_s"] < 0.05
    assert tool("suite_cpu").main([str(out)]) == 0
    summary = capsys.readouterr().out
    assert "2 tests in 1 files" in summary and "test_burn.py" in summary
