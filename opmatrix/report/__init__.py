"""Reports from the store only (never live objects): report.md through tabulate, a terminal view through rich.

sections.py builds each section once from the results DataFrame; markdown.py and terminal.py render the same
sections, each escaping what its format would otherwise misread; styles.py holds the one status colour table.
Importing this package imports neither pandas, tabulate nor rich.
"""
from opmatrix.report.markdown import markdown, write_markdown
from opmatrix.report.sections import sections
from opmatrix.report.table import Section


def print_terminal(df, console=None, verdicts=None) -> None:
    """The report's tables in the terminal (rich is imported only when this is called)."""
    from opmatrix.report.terminal import print_terminal as render

    render(df, console, verdicts)


__all__ = ["Section", "markdown", "print_terminal", "sections", "write_markdown"]
