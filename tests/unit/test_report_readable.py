"""A new user's report reads well (issue 45): the matrix's description under the report's title, failure reasons
in full in report.md and report.html, and in the terminal a shortened reason that ends in "..." at a word and
says where the full text is. The tables of a real run that fit a pipe: tests/cells/test_report_readable.py."""
import io
from types import SimpleNamespace

from rich.console import Console

from opmatrix import report
from opmatrix.core.text import shorten
from opmatrix.manifest import RunManifest
from opmatrix.matrix import load_matrix
from opmatrix.progress import ProgressView
from opmatrix.report.html.run_page import run_page
from opmatrix.run import new_manifest
from tests.helpers import probe_adapter, probe_matrix, report_frame, report_result, write_plugins


def test_the_matrix_description_is_recorded_and_shown_in_report_md_and_html(tmp_path):
    write_plugins(tmp_path, "probe", {"torch": "def build(w, dtype, device, variant):\n    return None\n"},
                  probe_adapter())
    path = probe_matrix(tmp_path, "described", ["torch"], ["quick"], timeout_s=60, rep_ms=5)
    path.write_text('description = "Nightly softmax check <for> the H200 fleet"\n'
                    + path.read_text().replace('arch = "auto"', 'arch = "auto"\ndescription = "the driver host"'))
    manifest = new_manifest(load_matrix(path), "r", [], None)
    assert manifest.description == "Nightly softmax check <for> the H200 fleet"
    assert manifest.devices == {"cpu": "the driver host"}
    assert RunManifest.from_json(manifest.to_json()).description == manifest.description  # kept in run.json
    df = report_frame(report_result("torch", median_ms=1.0))
    text = report.markdown(df, manifest)
    assert text.splitlines()[2] == "Nightly softmax check <for> the H200 fleet"  # under the title
    assert text.splitlines()[4] == "device `cpu`: the driver host"
    assert "Nightly softmax check &lt;for&gt; the H200 fleet" in run_page(df, manifest)
    older = RunManifest.from_json('{"run_id": "r"}')  # a run.json written before: no line, no error
    assert report.markdown(df, older).splitlines()[2].startswith("matrix ``")


LONG = ("nvcc failed: ptxas error: Entry function 'gemm_relu_kernel_0d1d2d3d' uses too much shared data (0x24000 "
        "bytes, 0xc000 max); lower BLOCK_M or num_stages in the tuned configuration, or let the autotuner prune "
        "configurations that do not fit the device's shared memory of 227 KB per block")


def _failed():
    return report_frame(report_result("torch", median_ms=1.0),
                        report_result("triton", status="compile_error", error=LONG + "\nTraceback (most recent call "
                                      "last):\n  File x", median_ms=None, rel_err=None))


def test_report_md_and_html_keep_a_failures_whole_reason():
    assert len(LONG) > 200
    df = _failed()
    manifest = RunManifest(run_id="r")
    text = report.markdown(df, manifest)
    assert f"| {LONG} |" in text and "Traceback" not in text  # the whole first line; the frames stay in results
    page = run_page(df, manifest)
    assert LONG.replace("'", "&#x27;") in page or LONG in page


def test_the_terminal_cuts_a_long_reason_at_a_word_and_says_where_the_whole_is():
    out = Console(file=io.StringIO(), width=400)
    report.print_terminal(_failed(), out, full_text="reports/r/report.md")
    text = out.file.getvalue()
    line = next(x for x in text.splitlines() if "nvcc failed" in x)
    shown = line[line.index("nvcc failed"):].rstrip(" │|").rstrip()
    head, _, where = shown.partition("... (full text: ")
    assert where == "reports/r/report.md)", shown
    assert LONG.startswith(head) and LONG[len(head)] == " " and len(head) <= 160  # cut before a space
    assert LONG not in text


def test_a_log_line_cuts_a_long_error_at_a_word_and_says_where_the_whole_will_be():
    plans = [SimpleNamespace(cell=SimpleNamespace(id="h200.a", device=SimpleNamespace(id="h200")),
                             all_jobs=lambda: [None])]
    out = Console(file=io.StringIO(), width=80)
    with ProgressView(plans, out, full_text="reports/r/report.md") as progress:
        progress.result(report_result("triton", status="compile_error", error=LONG, median_ms=None, rel_err=None,
                                      toolchain="a"))
    line = out.file.getvalue().strip()
    assert "\n" not in line and line.endswith("... (full text: reports/r/report.md)"), line
    head = line.split("compile_error: ")[1].split("... (full text")[0]
    assert LONG.startswith(head) and LONG[len(head)] == " "


def test_shorten_keeps_short_text_and_cuts_long_text_at_a_word():
    assert shorten("short text", 20) == "short text"
    assert shorten("one two three four five", 15) == "one two..."
    assert shorten("x" * 30, 10) == "xxxxxxx..."  # no space to cut at: the word is cut
    assert shorten("one two three four five", 15, "r.md") == "one two... (full text: r.md)"


def test_a_coverage_entrys_hover_text_cuts_a_long_reason_at_a_word():
    from opmatrix.report.coverage import HOVER_CHARS, coverage_reasons

    hover = "\n".join(text for row in coverage_reasons(_failed()) for text in row if text)
    why = hover.split("compile_error (w float16): ")[1]
    assert why.endswith("...") and LONG.startswith(why[:-3]) and LONG[len(why) - 3] == " "
    assert len(why) <= HOVER_CHARS
