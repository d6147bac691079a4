"""The report's sections on synthetic results: every (device, toolchain) keeps its rows, launch-bound calls and
rooflines above 100 % say what they are, old cross-check rows are left out with a count, clock drops are one
line per device, and report.md stays one table row per result whatever the error texts hold."""
import re

from opmatrix import paths, report
from opmatrix.core.result import Result
from opmatrix.manifest import RunManifest
from tests.helpers import report_frame, report_result


def section(df, title: str) -> report.Section:
    return next(s for s in report.sections(df) if s.title == title)


def two_toolchains():
    return report_frame(
        report_result("torch", median_ms=1.0, ceiling_tflops=700.0, ceiling_gbps=4000.0),
        report_result("triton", median_ms=0.8, ceiling_tflops=700.0, ceiling_gbps=4000.0),
        report_result("torch", "b", median_ms=2.0, ceiling_tflops=650.0, ceiling_gbps=4100.0),
        report_result("triton", "b", status="compile_error", error="boom", median_ms=None, rel_err=None))


def test_two_toolchains_on_one_device_each_keep_their_rows():
    df = two_toolchains()
    perf = section(df, "Performance: gemm")
    assert perf.headers[:4] == ["device", "workload", "dtype", "toolchain"]
    assert [row[3] for row in perf.rows] == ["a", "b"]
    assert perf.rows[0][4:6] == ["1 ms (1.00x)", "0.8 ms (1.25x)"] and perf.rows[1][4:6] == ["2 ms (1.00x)", ""]
    cover = section(df, "Coverage")
    assert cover.headers == ["kernel", "backend", "h200.a", "h200.b"]
    assert cover.rows[1] == ["gemm", "triton", "ok", "compile_error"]  # not "ok 1/2, compile_error 1/2"
    assert [r[4] for r in section(df, "Correctness").rows] == ["a", "b", "a"]
    assert [r[3] for r in section(df, "Compile time (s, first call included)").rows] == ["a", "b", "a", "b"]
    quality = section(df, "Measurement quality")
    assert [(r[1], r[3]) for r in quality.rows] == [("a", "4000"), ("b", "4100")]  # each cell's own ceiling


def test_one_toolchain_per_device_keeps_the_compact_tables():
    df = report_frame(report_result("torch", median_ms=1.0), report_result("triton", median_ms=0.5),
                      report_result("torch", device="mi300x", median_ms=1.5))
    assert section(df, "Performance: gemm").headers == ["device", "workload", "dtype", "torch", "triton", "fastest"]
    assert section(df, "Coverage").headers == ["kernel", "backend", "h200", "mi300x"]


def test_committed_two_toolchain_run_shows_all_24_timings():
    df = report_frame(*[Result.from_json(line) for line in (paths.REPORTS / "20261130-h200x2-parallel" /
                                                             "results.jsonl").read_text().splitlines()])
    perf = section(df, "Performance: gemm_relu")
    timings = [v for row in perf.rows for v in row if isinstance(v, str) and " ms (" in v]
    assert len(timings) == len(df[df.status == "ok"]) == 24
    assert {row[3] for row in perf.rows} == {"host-a", "host-b"}


def test_launch_bound_call_says_so_instead_of_a_rate():
    tiny = report_result(workload="decode", median_ms=0.0056, flops=4e4, min_bytes=3e4, tflops=7e-6, gbps=5.4,
                         ceiling_tflops=700.0, ceiling_gbps=4000.0, roofline_pct=0.1)
    big = report_result(workload="square", median_ms=1.0, flops=1e12, min_bytes=1e8, tflops=1000.0, gbps=100.0,
                        ceiling_tflops=890.0, ceiling_gbps=4000.0, roofline_pct=112.4, clock_events="SwPowerCap",
                        clock_dropped=True, sm_mhz_start=1980.0, sm_mhz_end=1500.0)
    rows = {r[1]: r[-1] for r in section(report_frame(tiny, big), "Performance: gemm").rows}
    assert rows["decode"] == "torch: launch-bound"
    assert rows["square"] == "torch: 1000.0 TFLOP/s, 112% of roofline (ceiling measured under the power cap)"


def test_old_separate_loop_crosscheck_rows_are_left_out_and_counted():
    same_loop = report_result(workload="new", median_ms=1.0, crosscheck_events_ms=1.01, cupti_ms=1.0,
                              cupti_diff_pct=1.0)
    old = report_result(workload="old", median_ms=0.05, cupti_ms=0.0015, cupti_diff_pct=3666.8)
    cross = section(report_frame(same_loop, old), "Cross-check against CUPTI")
    assert [r[2] for r in cross.rows] == ["new"]
    assert "1 of 2 rows are left out" in cross.note
    assert not any("3666.8" in line for line in cross.extra)


def test_clock_drops_are_one_line_per_device_and_a_mark_per_timing():
    telemetry = [("torch", True, "SwPowerCap", 1395.0), ("triton", True, "SwPowerCap", 1500.0),
                 ("cutlass", False, "", 1980.0)]
    df = report_frame(*[report_result(b, median_ms=1.0, clock_dropped=dropped, clock_events=events,
                                      sm_mhz_start=1980.0, sm_mhz_end=end, stability_pct=0.5)
                        for b, dropped, events, end in telemetry])
    assert section(df, "Measurement quality").extra == [
        "h200: clock dropped in 2/3 timed rows (SwPowerCap), SM 1395–1980 MHz"]
    perf = section(df, "Performance: gemm")
    assert perf.rows[0][3:6] == ["1 ms (1.00x)", "1 ms (1.00x) †", "1 ms (1.00x) †"]  # cutlass, torch, triton
    assert "†: the SM clock dropped" in perf.note


def _pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def test_markdown_cells_stay_one_table_row_whatever_the_text():
    bad = report_result("tilelang", variant="tuned", status="compile_error", median_ms=None, rel_err=None,
                        error="nvcc a|b failed [/red]\n[/usr/local/cuda/include/x.h] line 2", torch="2.1|local",
                        device_name="NVIDIA\nH200")
    text = report.markdown(report_frame(bad, report_result("torch", median_ms=1.0)), RunManifest(run_id="r"))
    assert "nvcc a\\|b failed [/red]" in text and "2.1\\|local" in text and "NVIDIA H200" in text
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if line.startswith("|")]
        assert len({_pipes(line) for line in lines}) <= 1, block  # every row has its header's columns


def _paired_baseline(twin_ratio_per_round, base_ms=3.6, calls=5, rounds_s=None):
    """The baseline row of one workload, its A/A twin at base_ms x the given factor per round."""
    rounds = len(twin_ratio_per_round)
    base = [base_ms] * rounds
    return report_result("torch", median_ms=base_ms, pairing="interleaved", rounds=rounds, round_ms=base,
                         aa_round_ms=[base_ms * f for f in twin_ratio_per_round],
                         samples_ms=[base_ms] * (calls * rounds), rounds_s=rounds_s)


def _aa_line(df) -> str:
    return next(line for line in section(df, "Measurement quality").extra if line.startswith("A/A noise floor"))


def test_a_wide_a_a_floor_says_what_it_was_measured_with_and_that_rounds_and_bursts_narrow_it():
    swings = [1.0 + 0.06 * ((-1) ** i) * (i % 3) / 2 for i in range(20)]  # rounds straying by up to ±6 %
    line = _aa_line(report_frame(_paired_baseline(swings, rounds_s=8.2)))
    assert "20 rounds of ~5-call bursts, 18 ms of calls each, 0.41 s per round, one round strays ±" in line
    assert "round-to-round noise" in line and "noise_target" in line and "burst_calls" in line


def test_a_steady_a_a_offset_is_not_called_noise_that_rounds_remove():
    line = _aa_line(report_frame(_paired_baseline([1.03 + 0.001 * (i % 2) for i in range(30)], base_ms=0.011)))
    assert "the twin sits 3.0% off the baseline" in line and "more rounds do not remove that" in line
    assert "noise_target" not in line


def test_a_narrow_a_a_floor_needs_no_advice():
    line = _aa_line(report_frame(_paired_baseline([1.0 + 0.002 * (i % 3 - 1) for i in range(30)])))
    assert line.endswith("workload(s))") and "noise_target" not in line and "off the baseline" not in line


def test_the_performance_table_says_which_contestants_left_the_extra_rounds():
    """Contestants that left the extra rounds once decided have fewer rounds than their baseline: the table says how
    many, after how many rounds; a resumed contestant (its baseline's row from another session) is not counted, and
    a run where every contestant took every round gets no such line."""
    import pandas as pd

    from opmatrix.report.performance import rounds_left

    def row(backend, rounds, group, base=True):
        return {"device": "h200", "workload": "w", "dtype": "float16", "toolchain": "host", "backend": backend,
                "pairing": "interleaved", "rounds": rounds, "round_group": group,
                "baseline_round_ms": [] if not base else [1.0] * rounds}

    k = pd.DataFrame([row("torch", 80, "g1", base=False), row("fast", 20, "g1"), row("slow", 35, "g1"),
                      row("near", 80, "g1"), row("resumed", 20, "g2")])
    assert rounds_left(k) == ("2 of 4 contestants left the extra rounds once their interval cleared the threshold, "
                              "after 20–35 rounds (the baseline and its A/A twin: 80 rounds); their intervals are "
                              "from their own rounds")
    assert rounds_left(k[k.backend.isin(["torch", "near", "resumed"])]) is None
    old = pd.DataFrame([row("torch", 20, None, base=False), row("fast", 10, None)])  # stored before round groups
    assert rounds_left(old) is None
