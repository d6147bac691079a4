"""The trend page of the nightly history (opmatrix.upgrade.history): every change point first (series, night,
size, what changed in the toolchain), then one chart per series with its change points marked, then every series
in a table. The trends are history.trends' values: the page draws them and computes nothing of its own.

A history holds hundreds of series; CHARTS caps the charts (series with change points first, then the longest)
so the page stays small, and says how many were left to the table; filters (`opmatrix history kernel=...
--html`) pick the series to chart.
"""
from __future__ import annotations

from pathlib import Path

from opmatrix.report.html import charts
from opmatrix.report.html.page import document, esc, figure, section, table
from opmatrix.upgrade.history import MIN_NIGHTS, PENALTY, short_night

CHARTS = 40
TREND_HTML = "trend.html"  # the default page in the history folder
METHOD = (f"change points: ruptures' PELT on log(value) in units of the series' noise, penalty {PENALTY:g}, at least "
          f"{MIN_NIGHTS} nights on a new level (opmatrix.upgrade.history); a dashed red line marks the first night "
          "of a shift, labelled with its size (median after / before) and what changed in the toolchain that night")


def trend_page(trends: list, metric: str, source: str) -> str:
    shifts = [(t, s) for t in trends for s in t.shifts]
    title = f"History of {metric}: {len(trends)} series, {len(shifts)} change point(s)"
    body = [f"<h1>{esc(title)}</h1>", f'<p class="note">{esc(source)}; {esc(METHOD)}</p>']
    body.append(section("Change points", table(["series", "first night", "run", "after / before", "what changed"],
                                               [[t.label(), short_night(s.night), s.run_id, f"x{s.ratio:.3f}",
                                                 s.changed] for t, s in shifts])))
    charted = sorted(trends, key=lambda t: (-len(t.shifts), -len(t.values), t.label()))[:CHARTS]
    charted = [t for t in charted if len(t.values) > 1]
    left = len([t for t in trends if len(t.values) > 1]) - len(charted)
    note = (f"{len(charted)} series of more than one night charted"
            + (f"; {left} more in the table below (filter to chart them)" if left else ""))
    figures = "".join(figure(charts.trend_chart(t, f"trend-{i}")) for i, t in enumerate(charted))
    body.append(section("Series", f'<div class="grid2">{figures}</div>', note=note))
    rows = [[t.label(), len(t.values), f"{short_night(t.nights[0])} → {short_night(t.nights[-1])}",
             f"{t.values[-1]:.4g}", len(t.shifts)] for t in trends]
    body.append(section("Every series", table(["series", "nights", "from → to", f"last {metric}", "change points"],
                                              rows)))
    return document(title, body)


def write_trend_page(trends: list, metric: str, path: Path, source: str) -> Path:
    path.write_text(trend_page(trends, metric, source), encoding="utf-8")
    return path
