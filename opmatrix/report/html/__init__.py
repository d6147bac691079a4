"""Self-contained HTML pages: report.html per run, comparison.html per upgrade comparison, a trend page of the
nightly history. One file each, no script, nothing fetched (page.py); charts are inline SVG from matplotlib
(charts.py); the tables are the same Section values report.md renders.

    page.py          the skeleton, escaping, status colours, tables
    charts.py        matplotlib -> inline SVG: speed-ups, roofline, before/after, trend
    run_page.py      report.html
    compare_page.py  comparison.html (opmatrix.upgrade.compare)
    trend_page.py    the history's trends with their change points (opmatrix.upgrade.history)
"""
