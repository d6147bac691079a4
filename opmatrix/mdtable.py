"""Markdown table cells made safe, in one place: for report.md and for every other Markdown table opmatrix writes
(comparisons, bisections, deployments, history, profiles).

Cells carry text from results (error messages, versions, configurations). A `|` in one would start a new column,
a newline would end the table and a control character would act on the terminal of whoever `cat`s the file, so
every cell, header and bullet goes through here (control characters: opmatrix.core.text). Below the report and
the upgrade comparisons, which both write tables.
"""
from __future__ import annotations

import re

from opmatrix.core.text import visible

_NEWLINES = re.compile(r"\s*[\r\n]+\s*")


def inline(text: str) -> str:
    """One line: newlines (with the indentation around them) become a single space; control characters are
    written out (core.text.visible)."""
    return _NEWLINES.sub(" ", visible(text))


def cell(value):
    """A table cell: one line, `|` escaped. Numbers stay numbers so tabulate still aligns them."""
    if not isinstance(value, str):
        return value
    return inline(value).replace("|", r"\|")


def row(cells) -> str:
    """One unpadded table row of table-safe cells (where a table is written line by line)."""
    return "| " + " | ".join(str(cell(c)) for c in cells) + " |"


def table(headers: list, rows: list[list]) -> str:
    from tabulate import tabulate

    return tabulate([[cell(v) for v in row] for row in rows], headers=[cell(str(h)) for h in headers],
                    tablefmt="github")
