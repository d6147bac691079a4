"""comparison.html: upgrade comparisons (opmatrix.upgrade.compare) as a page. Per comparison: its verdict, how it
was made and what differs in the toolchain, the rows that break or risk first, a before/after chart of the timed
rows (time after / before with its 95 % interval against the thresholds), then every row.

The text and the table rows are compare.summary / differs / row_cells, the same ones comparison.md prints.
"""
from __future__ import annotations

from pathlib import Path

from opmatrix.report.html import charts
from opmatrix.report.html.page import document, esc, figure, section, table
from opmatrix.upgrade import compare

OUTCOME_CLASS = {compare.BREAKS: "st-red", compare.RISK: "st-yellow", compare.IMPROVED: "st-green",
                 compare.UNCOMPARED: "st-dim", compare.SAME: ""}
VERDICT_CLASS = {compare.BREAKS: "st-red", compare.RISK: "st-yellow", compare.SAFE: "st-green",
                 compare.NOTHING: "st-dim"}
CHART_ROWS = 80  # the before/after chart shows at most this many timed rows (the worst first); the table has all


def compare_page(comparisons: list, title: str = "opmatrix compare") -> str:
    body = [f"<h1>{esc(title)}</h1>"]
    for i, c in enumerate(comparisons):
        body.append(_comparison(c, i))
    if not comparisons:
        body.append('<p class="empty">(no comparison)</p>')
    return document(title, body)


def write_compare_page(comparisons: list, path: Path, title: str = "opmatrix compare") -> Path:
    path.write_text(compare_page(comparisons, title), encoding="utf-8")
    return path


def _comparison(c, i: int) -> str:
    heading = (f'<p class="headline"><span class="{VERDICT_CLASS.get(c.verdict, "")}">&nbsp;{esc(c.verdict)}'
               f"&nbsp;</span> the upgrade from {esc(c.baseline)} to {esc(c.candidate)}</p>")
    notes = [f'<p class="note">{esc(compare.summary(c).replace("**", ""))}</p>',
             f'<p class="note">{esc(compare.differs(c))}</p>']
    first = [r for r in c.rows if r.outcome in (compare.BREAKS, compare.RISK)]
    parts = [heading, *notes, section("Breaks and risks", _rows(first), level=3)]
    timed = [r for r in c.rows if r.time_ratio is not None][:CHART_ROWS]
    if timed:
        thresholds = [r.threshold for r in timed if r.threshold]
        threshold = max(thresholds) if thresholds else c.min_speedup
        left = sum(r.time_ratio is not None for r in c.rows) - len(timed)
        caption = ("time after / before (candidate / baseline) per timed row with its 95% interval; dashed: the "
                   f"widest threshold of these rows ({threshold:.3f}) and its inverse; coloured by outcome"
                   + (f"; {left} more timed rows in the table below" if left else ""))
        parts.append(section("Before / after", figure(charts.before_after_chart(timed, threshold,
                                                                                f"compare-{i}"), caption), level=3))
    parts.append(section("Every row", _rows(c.rows), level=3))
    return section(f"{c.baseline} -> {c.candidate}", *parts)


def _rows(rows: list) -> str:
    return table(list(compare.TABLE_HEADERS), [list(compare.row_cells(r)) for r in rows],
                 classes=[OUTCOME_CLASS.get(r.outcome, "") for r in rows])
