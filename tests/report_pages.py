"""Helpers of the HTML report tests (test_report_html.py in tests/unit and tests/golden, test_report_browser.py in
tests/cells): a real stored run made hostile, a parse of a page's markup, and the megabyte pages are weighed in."""
from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

from opmatrix import paths
from opmatrix.store import RESULTS_JSONL

MB = 1024 * 1024
RUN = "nightly-20261130-101538"  # a real CPU nightly: verdicts, a [[compare]], paired timing, ceilings
EVIL_KERNEL = "k<script>document.title='pwned'</script>"
EVIL_BACKEND = "b</table><script>window.pwned=1</script>"
EVIL_FAILED = "f<img src=x onerror=\"window.pwned=2\">"
EVIL_ERROR = "RuntimeError: </table></td><script>window.pwned=3</script> at <module> & \"quotes\" 'too' $x^2$"


def hostile_run(tmp: Path) -> Path:
    """A copy of the real run RUN with rows added whose names and error carry markup: a kernel (timed, so it gets
    a speed-up chart and a section of its own), a backend label in that chart, and a backend that was ok under the
    baseline toolchain and fails under the candidate: its error is the hover text of its coverage entry, a line of
    the failures table, and the reason the comparison says `breaks`."""
    folder = tmp / RUN
    shutil.copytree(paths.REPORTS / RUN, folder)
    rows = [json.loads(line) for line in (folder / RESULTS_JSONL).read_text().splitlines()]
    base = next(r for r in rows if r["cell"] == "cpu.tl015" and r["backend"] == "torch" and r["kernel"] == "gemm_relu")
    rival = next(r for r in rows if r["cell"] == "cpu.tl015" and r["variant"] == "cpu")
    unsupported = next(r for r in rows if r["cell"] == "cpu.tl015" and r["status"] == "unsupported")
    was_ok = next(r for r in rows if r["cell"] == "cpu.tl014" and r["variant"] == "cpu")
    added = [dict(base, kernel=EVIL_KERNEL), dict(rival, kernel=EVIL_KERNEL, backend=EVIL_BACKEND, variant="default"),
             dict(was_ok, backend=EVIL_FAILED, variant="default"),  # ok under the baseline toolchain, failing under
             # the candidate: the upgrade breaks it
             dict(unsupported, backend=EVIL_FAILED, variant="default", status="runtime_error", error=EVIL_ERROR)]
    with open(folder / RESULTS_JSONL, "a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in added)
    return folder


class Markup(HTMLParser):
    """Every start tag with its attributes, and the text as a browser would show it (character references
    resolved)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def names(self) -> set[str]:
        return {tag for tag, _ in self.tags}

    def handlers(self) -> list[str]:
        """Event-handler attributes (onerror=, onload=...) anywhere in the markup."""
        return [f"{tag} {name}" for tag, attrs in self.tags for name in attrs if name.lower().startswith("on")]
