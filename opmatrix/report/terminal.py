"""The terminal view of the report: the same sections as report.md, as rich tables, each cut at TERMINAL_ROWS rows
(a run of 200,000 rows has tables of tens of thousands; the terminal says how many more report.md holds).

rich reads `[...]` in a string as markup: `tilelang[tuned]` would lose its variant, and an error text such as
`[/usr/local/cuda/include/x.h]` or `[/red]` would raise MarkupError after the whole run had finished. So every
string from the data (labels, versions, errors, even our own notes, which mention `[run]`) is escaped here, and
styles are applied only around escaped text. Control characters (an escape sequence in an error text would
clear the screen or retitle the terminal) are written out too (styles.plain).
"""
from __future__ import annotations

from opmatrix.core.text import shorten
from opmatrix.report.sections import COMPILE_TITLE, sections
from opmatrix.report.styles import cell_style, plain

TERMINAL_ROWS = 200  # rows of one table shown in the terminal; report.md and report.html have every row
TERMINAL_LINES = 50  # lines under one table (a line per unstable row, say), likewise
REASON_CHARS = 160  # a failure's reason in the terminal, cut at a word with "..."; report.md has all of it
PIPE_WIDTH = 120  # a log or a pipe: tables fit this many columns (rich's 80 folds a table into shards; a wider
# one runs off a CI log viewer and a pager)


def widen(console) -> None:
    """Output that is not a terminal (CI logs, `| tee`, `| less`) gets PIPE_WIDTH columns: every table fits them,
    its long cells (a verdict's why, a failure's reason) wrapped at words inside their column. A width the console
    was given, or $COLUMNS, is kept. The notes under a table stay one line each (soft wrap)."""
    if not console.is_terminal and console._width is None:  # rich keeps a given width or $COLUMNS there
        console.width = PIPE_WIDTH


def styled(value) -> str:
    """A table cell as safe markup: the text escaped, coloured when it names a status."""
    text = str(value)
    style = cell_style(text)
    return f"[{style}]{plain(text)}[/]" if style else plain(text)


def print_terminal(df, console=None, verdicts=None, full_text: str = "") -> None:
    """The sections as rich tables; a failure's reason cut at a word after REASON_CHARS characters, with "..." and
    `full_text` (the file that holds it whole: report.md)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    widen(console)
    for sec in sections(df, verdicts):
        if sec.title == COMPILE_TITLE or not sec.rows:
            continue
        table = Table(title=plain(sec.title))
        for header in sec.headers:
            table.add_column(plain(str(header)), overflow="fold")
        reasons = [i for i, header in enumerate(sec.headers) if header == "reason"]
        for row in sec.rows[:TERMINAL_ROWS]:
            row = [shorten(str(v), REASON_CHARS, full_text) if i in reasons else v for i, v in enumerate(row)]
            table.add_row(*[styled(v) for v in row])
        console.print(table)
        if len(sec.rows) > TERMINAL_ROWS:
            console.print(f"[yellow]... and {len(sec.rows) - TERMINAL_ROWS} more rows of {plain(sec.title)}: see "
                          "report.md or report.html[/]")
        if sec.note:  # below the table, not as its caption: a caption folds to the width of a narrow table
            console.print(f"[dim]{plain(sec.note)}[/]", soft_wrap=not console.is_terminal)
        for e in sec.extra[:TERMINAL_LINES]:
            console.print(plain(e))
        if len(sec.extra) > TERMINAL_LINES:
            console.print(f"[yellow]... and {len(sec.extra) - TERMINAL_LINES} more lines: see report.md[/]")
