"""Reports from the store only (never live objects): report.md through tabulate, a terminal view through rich,
report.html (opmatrix.report.html: one self-contained page with charts).

sections.py builds each section once from the results DataFrame; markdown.py and terminal.py render the same
sections, each escaping what its format would otherwise misread; styles.py holds the one status colour table.
build.py builds a run's whole report from its store (`finish`, `decided`): the ending of `opmatrix run` and
`opmatrix report`. Importing this package imports neither pandas, tabulate, rich nor matplotlib.
"""
from opmatrix.report.markdown import markdown, write_markdown
from opmatrix.report.sections import sections
from opmatrix.report.table import Section


def print_terminal(df, console=None, verdicts=None, full_text: str = "") -> None:
    """The report's tables in the terminal (rich is imported only when this is called); a long failure reason is
    shortened there, saying that `full_text` (report.md) holds it whole."""
    from opmatrix.report.terminal import print_terminal as render

    render(df, console, verdicts, full_text)


def write_html(df, manifest, path, verdicts=None):
    """report.html beside report.md: the same sections as one page with charts (matplotlib imported here)."""
    from opmatrix.report.html.run_page import write_run_page

    return write_run_page(df, manifest, path, verdicts)


__all__ = ["Section", "markdown", "print_terminal", "sections", "write_html", "write_markdown"]
