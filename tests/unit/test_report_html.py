"""report.html, comparison.html and the trend page, read as markup (the browser test,
tests/cells/test_report_browser.py, opens them in Chromium): written where report.md and comparison.md are, the same
sections, every text from results escaped (names, errors, chart labels), charts inline. The pages rebuilt from
committed rows, deterministic and small: tests/golden/test_report_html.py."""
import contextlib
import html
import io
import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

from opmatrix import cli, paths
from opmatrix.report.html import charts
from opmatrix.upgrade import history
from tests.report_pages import EVIL_BACKEND, EVIL_ERROR, EVIL_FAILED, EVIL_KERNEL, MB, RUN, Markup, hostile_run

pytestmark = pytest.mark.usefixtures("html_pages")  # the suite writes no pages elsewhere (tests/conftest.py)

DANGEROUS = {"script", "img", "iframe", "object", "embed", "form", "input"}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, html_pages):
    """The hostile copy of a real nightly, reported by `opmatrix report`: (its folder, what the terminal printed)."""
    folder = hostile_run(tmp_path_factory.mktemp("html"))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli.main(["report", str(folder)]) == 0
    return folder, printed.getvalue()


def test_report_writes_the_page_beside_report_md_and_prints_its_path(hostile):
    folder, printed = hostile
    assert f"page:    {folder / 'report.html'}" in printed
    assert (folder / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert (folder / "comparison.html").is_file()  # a run with [[compare]]: beside comparison.md


def test_opmatrix_html_0_writes_no_pages_and_says_so(tmp_path, monkeypatch):
    """The switch the rest of the suite runs with: report.md, comparison.md and the rest as always, no pages."""
    folder = hostile_run(tmp_path)
    monkeypatch.setenv("OPMATRIX_HTML", "0")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli.main(["report", str(folder)]) == 0
    assert "page:    not written (OPMATRIX_HTML=0)" in printed.getvalue()
    assert not (folder / "report.html").exists() and not (folder / "comparison.html").exists()
    assert (folder / "report.md").is_file() and (folder / "comparison.md").is_file()


def test_every_text_from_results_is_escaped(hostile):
    page = (hostile[0] / "report.html").read_text()
    markup = Markup(page)
    assert not markup.names() & DANGEROUS and not markup.handlers()
    text = "".join(markup.text)
    for evil in (EVIL_KERNEL, EVIL_BACKEND, EVIL_FAILED, EVIL_ERROR):
        assert evil in text  # shown as written: as text, in tables, headings and chart labels
    hovers = [attrs["title"] for tag, attrs in markup.tags if tag == "td" and "title" in attrs]
    assert any(EVIL_ERROR in h for h in hovers)  # the coverage entry's reason, on hover
    assert "<script" not in page.lower() and "<img" not in page.lower()


def test_the_comparison_page_puts_the_broken_row_first_and_escapes_it(hostile):
    page = (hostile[0] / "comparison.html").read_text()
    markup = Markup(page)
    assert not markup.names() & DANGEROUS and not markup.handlers()
    text = "".join(markup.text)
    assert "breaks" in text and EVIL_FAILED in text and EVIL_ERROR[:60] in text
    first = text.index("Breaks and risks")
    assert text.index(EVIL_FAILED, first) < text.index("Every row")  # listed before the full table
    assert 'data-chart="compare-0"' in page  # the before/after chart


def test_the_page_has_every_section_of_report_md_and_a_chart_per_timed_kernel(hostile):
    folder = hostile[0]
    page = (folder / "report.html").read_text()
    md_titles = re.findall(r"^## (.+)$", (folder / "report.md").read_text(), flags=re.M)
    headings = re.findall(r"<h2>(.*?)</h2>", page)
    assert [html.unescape(h) for h in headings if h != "Roofline"] == _html_order(md_titles)
    charts_in_page = re.findall(r'data-chart="([^"]+)"', page)
    assert {"speedup-gemm_relu", "roofline"} <= set(charts_in_page)
    assert any(EVIL_KERNEL in html.unescape(c) for c in charts_in_page)
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "two elements share an id (the charts' SVG ids must not collide)"


def _html_order(md_titles: list[str]) -> list[str]:
    """report.md's sections in the page's order: verdicts, coverage, correctness, performance, then the rest,
    environments last."""
    first = [t for t in ("Verdicts", "Coverage", "Correctness") if t in md_titles]
    perf = [t for t in md_titles if t.startswith("Performance")]
    last = [t for t in md_titles if t not in first + perf + ["Environments"]]
    order = {"Compile time (s, first call included)": 0, "Autotuning": 1, "Measurement quality": 2,
             "Cross-check against CUPTI": 3, "Not run, unsupported or failed": 4}
    return first + perf + sorted(last, key=order.__getitem__) + ["Environments"]


def test_a_chart_label_with_markup_stays_text_in_the_svg():
    points = pd.DataFrame({"device": ["h200"], "toolchain": ["a<b>"], "label": ["<script>alert(1)</script>"],
                           "case": ["w </svg><script>x</script> float16"], "speedup": [1.2], "lo": [1.1],
                           "hi": [1.3]})
    svg = charts.speedup_chart(points, 'salt"><script>')
    root = ET.fromstring(svg)  # well-formed XML: nothing closed early
    tags = {el.tag.split("}")[-1] for el in root.iter()}
    assert "script" not in tags
    text = "".join(root.itertext())
    assert "<script>alert(1)</script>" in text and "</svg><script>x</script>" in text


def test_the_trend_page_marks_a_planted_shift(tmp_path, capsys):
    """Eight nights of a real run's history rows, 30 % slower from the fifth night on, when tilelang changed: the
    page names that change point (night, size, what changed) and draws its line."""
    rows = history.history_rows(paths.REPORTS / RUN)
    rng = np.random.default_rng(7)
    folder = tmp_path / "history"
    folder.mkdir()
    for i in range(8):
        night = rows.copy()
        night["run_id"] = f"night-{i}"
        night["night"] = night.night + pd.Timedelta(days=i)
        night["median_ms"] = night.median_ms * (1.3 if i >= 4 else 1.0) * rng.normal(1, 0.01, len(night))
        night["tilelang"] = "0.1.16" if i >= 4 else night.tilelang
        night.to_parquet(folder / f"night-{i}.parquet", index=False)
    out = tmp_path / "trend.html"
    assert cli.main(["history", "kernel=gemm_relu", "backend=torch", "toolchain=tl015", "--history", str(folder),
                     "--html", str(out)]) == 0  # one toolchain: a series per toolchain since 9dbf549
    assert capsys.readouterr().out.strip() == str(out)
    page = out.read_text()
    text = "".join(Markup(page).text)
    assert "History of median_ms: 1 series, 1 change point(s)" in text
    assert "night-4" in text and "tilelang 0.1.15 → 0.1.16" in text and "x1.3" in text
    assert 'stroke: #c62828' in page  # the change point's dashed line
    assert len(page.encode()) < 1 * MB


def test_an_unwritable_page_path_is_a_usage_error(tmp_path, capsys):
    missing = tmp_path / "no" / "such" / "page.html"
    assert cli.main(["history", "kernel=rmsnorm", "device=cpu", "--html", str(missing)]) == 2
    assert f"--html {missing}: cannot write it" in capsys.readouterr().err
    assert cli.main(["compare", RUN, "--html", str(missing)]) == 2
    assert f"--html {missing}: cannot write it" in capsys.readouterr().err


def test_compare_html_defaults_to_the_run_folder(tmp_path, capsys):
    folder = hostile_run(tmp_path)
    assert cli.main(["report", str(folder)]) == 0  # results.parquet from the hostile rows (compare reads it)
    (folder / "comparison.html").unlink()
    assert cli.main(["compare", str(folder), "--html"]) == 1  # the hostile row breaks the upgrade
    assert f"comparison page: {folder / 'comparison.html'}" in capsys.readouterr().err
    assert (folder / "comparison.html").is_file()
