"""The terminal report and the progress view print data as data: variants such as `tilelang[tuned]` survive,
error texts holding rich markup cannot crash the output, logs get 120 columns (not rich's 80), and both views
colour a status the same way."""
import io

from rich.console import Console

from opmatrix import report
from opmatrix.core import status
from opmatrix.progress import ProgressView
from opmatrix.report.styles import STATUS_STYLE
from tests.helpers import progress_plan, progress_plans, report_frame, report_result

ERROR = "nvcc failed [/red] in [/usr/local/cuda/include/x.h]\nsecond line"


def console(**kwargs) -> Console:
    return Console(file=io.StringIO(), **kwargs)


def marked_up_results():
    return [report_result("tilelang", variant="tuned", median_ms=1.0),
            report_result("triton", status="compile_error", error=ERROR, median_ms=None, rel_err=None),
            report_result("torch", median_ms=2.0)]


def test_terminal_report_keeps_variants_and_survives_markup_in_errors(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)  # pytest-xdist's workers set 80
    out = console()  # not a terminal, 80 columns by default: a CI log, given 120 (terminal.PIPE_WIDTH)
    report.print_terminal(report_frame(*marked_up_results()), out)
    text = out.file.getvalue()
    assert "tilelang[tuned]" in text
    assert "nvcc failed [/red] in [/usr/local/cuda/include/x.h]" in text  # one row, not folded at 80 columns
    assert "[run]" in text  # our own notes mention `[run] cuda_graph_below_ms`: text too


def test_progress_log_lines_print_labels_and_errors_as_text():
    for plans in (progress_plans(),):
        out = console()
        with ProgressView(plans, out) as progress:
            progress.started("h200.a", "host [gpu 0]")
            for r in marked_up_results():
                progress.result(r)
            progress.note("h200.a: RayActorError [/red]; 1 job(s) resubmitted")
            progress.finished("h200.a")
        lines = out.file.getvalue().splitlines()
        assert lines[0] == "h200.a: started on host [gpu 0]"
        assert lines[1] == "[   1/4] h200.a gemm w float16 tilelang[tuned] -> ok 1 ms"
        assert lines[2] == "[   2/4] h200.a gemm w float16 triton -> compile_error: nvcc failed [/red] in " \
                           "[/usr/local/cuda/include/x.h]"
        assert lines[4] == "h200.a: RayActorError [/red]; 1 job(s) resubmitted"
        assert progress.total == 4


def test_live_progress_shows_each_device_and_the_job_a_cell_is_on():
    out = console(force_terminal=True, width=200)
    with ProgressView(progress_plans(), out) as progress:
        progress.started("h200.a", "node [abc]")
        progress.result(marked_up_results()[0])
        progress.note("[/red] is not markup")
    text = out.file.getvalue()
    assert "h200.a @ node [abc]: gemm w float16 tilelang[tuned]" in text
    assert "mi300x" in text and "1/3" in text and "[/red] is not markup" in text


def test_every_status_has_one_style_used_by_both_views():
    assert set(STATUS_STYLE) == set(status.ALL)
    compiles = report_result("triton", status=status.COMPILES, median_ms=None, rel_err=None)
    colours = Console(file=io.StringIO(), color_system="standard", width=200)  # colours, but not a terminal
    with ProgressView([progress_plan("h200.a", "h200", 1)], colours) as progress:
        progress.result(compiles)
    progress_line = colours.file.getvalue()
    colours.file = io.StringIO()
    report.print_terminal(report_frame(compiles), colours)
    table = colours.file.getvalue()
    cyan = "\x1b[36mcompiles\x1b[0m"
    assert cyan in progress_line and cyan in table


def test_a_narrow_tables_note_is_one_line_in_a_log():
    out = console()
    report.print_terminal(report_frame(*marked_up_results()), out)
    lines = out.file.getvalue().splitlines()
    # the coverage table is three columns wide; its note is a sentence of 300 characters
    assert any(line.startswith("one entry per kernel x backend x device over all its workloads and dtypes;")
               and line.rstrip().endswith("needs another implementation") for line in lines)
