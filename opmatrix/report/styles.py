"""The one status -> rich style table, shared by the live progress view and the terminal report, and the one way
both put a text from the data into rich markup (`plain`).

Both views colour the same statuses; two tables drifted (the progress view once showed `compiles` red and the
report cyan), so the colours live here, keyed by the status constants, and nowhere else.
"""
from __future__ import annotations

import re

from opmatrix.core import status
from opmatrix.core.text import visible

STATUS_STYLE: dict[str, str] = {
    status.OK: "green",
    **{s: "red" for s in status.FAILED},  # it runs here, but it is broken
    status.UNSUPPORTED: "yellow",  # this backend does not cover the device: another implementation is needed
    status.NOT_INSTALLED: "yellow",
    status.NO_HOST: "dim",  # nothing was tried: no host of the run has the device
    **{s: "cyan" for s in status.BUILD_ONLY},  # answered without the device: built, never run
}

# A table cell that is a status, or starts with one: "ok", "ok (correctness only)", "ok 6/8, unsupported 2/8".
_STATUS_CELL = re.compile(r"^([a-z_]+)(?: \d+/\d+)?(?:,|$| \()")


def status_style(value: str) -> str:
    """The style of one status; an unknown status is shown unstyled rather than guessed at."""
    return STATUS_STYLE.get(value, "")


def cell_style(text: str) -> str:
    """The style of a report cell that names a status (coverage and correctness columns), else ""."""
    match = _STATUS_CELL.match(text)
    return status_style(match.group(1)) if match else ""


def plain(text: str) -> str:
    """A text from the data (a label, a path, an error a kernel or compiler wrote) as rich markup that prints it as
    it reads: control characters written out (core.text.visible: an escape sequence would clear the screen or
    retitle the terminal), then `[` escaped (`tilelang[tuned]`, `[/red]` are text, not markup)."""
    from rich.markup import escape

    return escape(visible(str(text)))
