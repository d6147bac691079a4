"""Control characters in texts from kernels, compilers and workers (issue 29, item 4): opmatrix.core.text.visible
writes them out, a stored row never holds one, a row stored before (or tampered with) is made safe when read, and
every renderer (terminal, progress view, report.md, report.html, JUnit) shows such a text as text. The whole path
through a real run is tests/faults/test_text_injection.py."""
import io
import json
import xml.etree.ElementTree as ET

import pandas as pd
from rich.console import Console

from opmatrix import report
from opmatrix.core.result import Result
from opmatrix.core.text import visible, visible_fields, visible_frame
from opmatrix.manifest import RunManifest
from opmatrix.progress import ProgressView
from opmatrix.store import RESULTS_JSONL, RESULTS_PARQUET, load_run
from opmatrix.report.html.page import esc, table
from opmatrix.report.markdown import cell, inline
from opmatrix.upgrade import compare
from tests.helpers import progress_plans, report_frame, report_result

HOSTILE = "\x1b[2J\x1b]0;pwned\x07 boom"
SHOWN = r"\x1b[2J\x1b]0;pwned\x07 boom"
RAW = [chr(c) for c in [*range(0x00, 0x09), *range(0x0b, 0x20), 0x7f, *range(0x80, 0xa0)]]


def raw_in(text: str) -> list[str]:
    return sorted({repr(c) for c in text if c in RAW})


def test_visible_writes_out_control_characters_and_keeps_what_a_reader_sees():
    assert visible(HOSTILE) == SHOWN
    assert visible("a\tb\nc") == "a\tb\nc"  # tab and newline lay out a traceback
    assert visible("line\r\nnext\rover") == "line\nnext\nover"  # a lone CR would overwrite the line's start
    assert visible("\x00\x7f\x9b\u202e\u2066") == r"\x00\x7f\x9b\u202e\u2066"  # NUL, DEL, C1 CSI, bidi controls
    text = "1.02x [0.99, 1.05] µs × — é 漢 `tilelang[tuned]` <b> \\x1b"
    assert visible(text) is text  # printable text, backslashes included, is left alone
    for sample in (HOSTILE, "a\r\n\x1b", "\x9b\u202e"):
        assert visible(visible(sample)) == visible(sample)  # applying it twice changes nothing


def test_a_stored_row_holds_no_control_character_and_reads_back_the_same():
    row = Result(run_id="r", cell="c", kernel="k", workload="w", dtype="float32", backend="b", status="crashed",
                 error=HOSTILE, stderr_tail="progress 10%\rprogress 90%\r\n", round_clock_events=["ok\x07"],
                 samples_ms=[1.0, 2.0])
    line = row.to_json()
    assert not raw_in(line) and "\\u001b" not in line and "\\u0007" not in line and "\\r" not in line
    back = Result.from_json(line)
    assert back.error == SHOWN and back.stderr_tail == "progress 10%\nprogress 90%\n"
    assert back.round_clock_events == [r"ok\x07"] and back.samples_ms == [1.0, 2.0]
    assert Result.from_json(back.to_json()) == back


def test_a_row_stored_raw_before_is_made_safe_when_read():
    """A line written before rows were made safe (or tampered with) holds `\\u001b`: the reader shows it."""
    data = json.loads(Result(run_id="r", cell="c", kernel="k", workload="w", dtype="float32", backend="b",
                             status="compile_error").to_json())
    data["error"] = HOSTILE
    assert Result.from_json(json.dumps(data)).error == SHOWN
    clean = {"error": "fine", "samples_ms": [1.0]}
    assert visible_fields(clean) is clean  # nothing to do: the same dict


def test_a_results_parquet_written_raw_before_is_made_safe_by_load_run(tmp_path):
    """`opmatrix compare`, `history` and `deployments` read a consolidated run's results.parquet, not its rows."""
    df = report_frame(report_result("torch", median_ms=1.0),
                      report_result("triton", status="compile_error", error="x", median_ms=None, rel_err=None))
    df.loc[1, "error"] = HOSTILE  # as a parquet written before rows were made safe holds it
    (tmp_path / RESULTS_JSONL).write_text("")
    df.to_parquet(tmp_path / RESULTS_PARQUET, index=False)
    assert list(load_run(tmp_path).error) == ["", SHOWN]
    assert list(visible_frame(pd.DataFrame({"e": ["ok", None]})).e.isna()) == [False, True]


def hostile_frame():
    return report_frame(report_result("torch", median_ms=1.0),
                        report_result("triton", status="compile_error", error=HOSTILE + "\nsecond line",
                                      median_ms=None, rel_err=None),
                        report_result("tilelang\x1b[31m", median_ms=0.5))


def test_terminal_report_markdown_and_html_show_the_text_written_out(tmp_path):
    df = hostile_frame()
    for forced in (False, True):  # a log, and a colour terminal (rich's own colour codes are allowed there)
        out = Console(file=io.StringIO(), force_terminal=forced, width=300)
        report.print_terminal(df, out)
        text = out.file.getvalue()
        assert SHOWN in text and "\x1b[2J" not in text and "\x1b]" not in text and "\x07" not in text
        if not forced:
            assert not raw_in(text)
    md = report.markdown(df, RunManifest(run_id="r"))
    assert SHOWN in md and not raw_in(md)
    page = report.write_html(df, RunManifest(run_id="r"), tmp_path / "report.html").read_text(encoding="utf-8")
    assert SHOWN in page and not raw_in(page)


def test_renderers_make_text_safe_even_when_it_did_not_come_from_a_row():
    """Defence in depth: a text that never went through the store (a Section built by hand, a live result)."""
    assert esc(HOSTILE) == SHOWN and not raw_in(table(["h\x07"], [[HOSTILE]]))
    assert cell(HOSTILE) == SHOWN and inline("a\x1b\nb") == r"a\x1b b"


def test_progress_view_live_and_logged_shows_no_raw_sequence():
    bad = Result(run_id="r", cell="h200.a", device="h200", kernel="gemm", workload="w\x1b[2J", dtype="float16",
                 backend="triton", status="compile_error", error=HOSTILE)
    for forced in (False, True):
        out = Console(file=io.StringIO(), force_terminal=forced, width=200)
        with ProgressView(progress_plans(), out) as progress:
            progress.started("h200.a", "host\x1b]0;title\x07")
            progress.working("h200.a", "building \x1b[2J")
            progress.result(bad)
            progress.note("node lost \x1b]0;x\x07")
            progress.finished("h200.a")
        text = out.file.getvalue()
        assert "\x1b[2J" not in text and "\x1b]" not in text and "\x07" not in text
        if not forced:
            assert SHOWN in text and r"host\x1b]0;title\x07" in text and not raw_in(text)


def test_junit_xml_of_a_comparison_with_a_hostile_row_is_valid_xml():
    row = compare.RowChange("cpu", "k\x1b", "w", "float32", "evil\x07", status_before="ok",
                            status_after="compile_error", outcome=compare.BREAKS, why=["ok -> compile_error: " + HOSTILE])
    comparison = compare.Comparison("a", "b", True, 1.05, ["r"], rows=[row])
    xml = compare.junit_xml([comparison])
    assert not raw_in(xml)
    case = ET.fromstring(xml).find(".//testcase")
    assert case.get("name") == r"evil\x07" and SHOWN in case.find("failure").text
