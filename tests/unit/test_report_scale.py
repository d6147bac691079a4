"""Large runs (issue 29 item 8) and `no_host` (issue 30 §2): a report's sections are built once for the three views,
a speed-up chart of many cases draws their spread, the roofline places a bounded number of rows, and a device no
host of the run has is one line (coverage grid and progress log), its rows still stored. Wall time and memory of
`opmatrix report` at 200,000 rows: lab/bench_report.py, figures in docs/results.md."""
import io

from rich.console import Console

from opmatrix import report
from opmatrix.core import status
from opmatrix.manifest import RunManifest
from opmatrix.progress import ProgressView
from opmatrix.report.html import run_page
from tests.helpers import progress_plans, report_frame, report_result


def hostless_run():
    """h200 ran; mi300x has no host: every one of its rows is `no_host`; b200 has none either, but one backend
    built for it (`compiles`), so it keeps its column."""
    rows = [report_result("torch", median_ms=1.0), report_result("triton", median_ms=0.5)]
    for backend in ("torch", "triton"):
        for w in ("w1", "w2", "w3"):
            rows.append(report_result(backend, device="mi300x", workload=w, status=status.NO_HOST,
                                      error="no host has a mi300x", median_ms=None, rel_err=None, compile_s=None))
        rows.append(report_result(backend, device="b200", status=status.COMPILES if backend == "triton" else
                                  status.NO_HOST, median_ms=None, rel_err=None, compile_s=None))
    return report_frame(*rows)


def test_a_device_without_a_host_is_one_line_under_the_grid_not_a_column():
    df = hostless_run()
    grid = next(s for s in report.sections(df) if s.title == "Coverage")
    assert grid.headers == ["kernel", "backend", "b200", "h200"]
    assert [row[2:] for row in grid.rows] == [["no_host", "ok"], ["compiles", "ok"]]
    assert grid.extra == ["`mi300x`: `no_host` for all 6 of its jobs (no host of this run has it; each is a stored "
                          "row)"]
    md = report.markdown(df, RunManifest(run_id="r"))
    assert md.count("`mi300x`: `no_host`") == 1 and "| mi300x" not in md
    assert len(df[df.device == "mi300x"]) == 6  # the rows are still there


def test_the_progress_log_says_no_host_once_per_device():
    out = Console(file=io.StringIO())
    with ProgressView(progress_plans(), out) as progress:
        for _ in range(3):
            progress.result(report_result("torch", device="mi300x", status=status.NO_HOST, median_ms=None))
        progress.result(report_result("triton", device="h200", median_ms=1.0))
    lines = out.file.getvalue().splitlines()
    assert [line for line in lines if "mi300x" in line] == ["mi300x: 3 job(s) no_host (no host of this run has it; "
                                                            "each is a stored row)"]
    assert any("triton" in line and "-> ok" in line for line in lines)


def test_the_sections_of_a_frame_are_built_once_for_every_view():
    df = hostless_run()
    first = report.sections(df)
    assert report.sections(df) is first  # report.md, report.html and the terminal share them
    assert report.sections(df.copy()) is not first  # another frame: built anew
    assert report.sections(df, verdicts=[]) is not first


def test_a_speed_up_chart_of_many_cases_draws_their_spread(tmp_path):
    rows = [report_result(backend, workload=f"w{i}", median_ms=ms) for i in range(run_page.CASES_DRAWN + 1)
            for backend, ms in (("torch", 1.0), ("triton", 0.5 + i / 100))]
    df = report_frame(*rows)
    page = report.write_html(df, RunManifest(run_id="r"), tmp_path / "report.html").read_text()
    assert "over its 13 workload x dtype cases: the median of the cases" in page
    assert page.count("<svg") == 1  # one chart for the kernel (its rows have no rate: no roofline)
    spread = run_page.spread_points(run_page.speedup_points(run_page.timed_rows(df), "torch"))
    assert len(spread) == 1 and spread.lo.iloc[0] < spread.speedup.iloc[0] < spread.hi.iloc[0]


def test_the_roofline_places_a_bounded_number_of_rows(monkeypatch):
    rows = [report_result(backend, workload=f"w{i}", median_ms=ms, tflops=1.0 / ms, flops=1e9,
                          min_bytes=1e6 * (i + 1), ceiling_tflops=10.0, ceiling_gbps=100.0)
            for i in range(20) for backend, ms in (("torch", 1.0), ("triton", 0.5))]
    timed = run_page.timed_rows(report_frame(*rows))
    assert len(run_page.roofline_points(timed)) == 40
    monkeypatch.setattr(run_page, "ROOFLINE_POINTS", 10)
    placed = run_page.roofline_points(timed)
    assert len(placed) == 10 and set(placed.tflops) == {2.0}  # the fastest of each workload, evenly spread
    assert "10 of 40 rows placed" in run_page.roofline_note(timed, len(placed))


def test_the_terminal_shows_the_first_rows_of_a_long_table_and_says_how_many_more(monkeypatch):
    from opmatrix.report import terminal

    monkeypatch.setattr(terminal, "TERMINAL_ROWS", 3)
    df = report_frame(*[report_result("torch", workload=f"w{i}", median_ms=1.0) for i in range(5)])
    out = Console(file=io.StringIO(), width=300)
    report.print_terminal(df, out)
    text = out.file.getvalue()
    assert "... and 2 more rows of Performance: gemm: see report.md or report.html" in text
    assert "w2" in text and "w3" not in text.split("Performance: gemm")[1].split("more rows")[0]
