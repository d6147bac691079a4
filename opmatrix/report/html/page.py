"""The page skeleton every HTML report shares: one file, inline CSS, no script, no network.

Everything that comes from results (error messages, versions, names, our own notes) enters the page through
`esc` or one of the builders here, which escape it; nothing else writes text into the markup. The page carries a
Content-Security-Policy that allows no script and no request at all (styles and images inline only), so a text
that escaped the escaping still could not run or fetch anything: the browser test asserts both.
"""
from __future__ import annotations

import html

from opmatrix.core import status
from opmatrix.core.text import visible
from opmatrix.report.styles import STATUS_STYLE, cell_style
from opmatrix.report.table import Section

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

# The status colours of styles.STATUS_STYLE (rich style names) as cell backgrounds: one colour table, two media.
BACKGROUND = {"green": "#d9f2dd", "red": "#f6c9c9", "yellow": "#fcefb4", "dim": "#e6e6e6", "cyan": "#cdeef5"}
MEANING = {"green": "ran and matched the reference", "red": "runs here, but broken",
           "yellow": "not covered: another implementation is needed", "dim": "not tried: no host with the device",
           "cyan": "built for the device, never run (no host has it)"}

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d232b; margin: 0;
       background: #fff; }
main { max-width: 1240px; margin: 0 auto; padding: 12px 20px 40px; }
h1 { font-size: 22px; margin: 10px 0 4px; } h2 { font-size: 18px; margin: 28px 0 6px; border-bottom: 1px solid #ccd;
     padding-bottom: 2px; } h3 { font-size: 15px; margin: 16px 0 4px; }
p.note, ul.extra { color: #4a5360; font-size: 12.5px; margin: 4px 0 8px; }
ul.extra { padding-left: 18px; } ul.extra li { margin: 1px 0; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: 12px; margin: 4px 0 8px; }
th, td { border: 1px solid #d3d8de; padding: 2px 7px; text-align: left; vertical-align: top; }
th { background: #f1f3f6; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.short { white-space: nowrap; } td.long { min-width: 80px; max-width: 560px; overflow-wrap: break-word; }
nav { font-size: 12.5px; margin: 6px 0 12px; } nav a { margin-right: 10px; }
.legend span { display: inline-block; padding: 1px 8px; margin: 2px 6px 2px 0; border: 1px solid #d3d8de;
               font-size: 12px; }
.headline { font-size: 15px; font-weight: 600; }
figure { margin: 6px 0 14px; } figure svg { max-width: 100%; height: auto; display: block; }
figcaption { color: #4a5360; font-size: 12.5px; }
.empty { color: #777; font-style: italic; }
.grid2 { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 4px 14px; }
"""
CSS += "".join(f".st-{name} {{ background: {colour}; }}\n" for name, colour in BACKGROUND.items())


def esc(value) -> str:
    """Text from results as HTML text: `<script>` shows as `<script>`, quotes are safe inside attributes, a
    control character (invalid in HTML) as its escape (core.text.visible)."""
    return html.escape(visible("" if value is None else str(value)), quote=True)


def status_class(text: str) -> str:
    """The CSS class of a cell that names a status ("ok", "ok 6/8, unsupported 2/8"), else ""."""
    style = cell_style(str(text))
    return f"st-{style}" if style in BACKGROUND else ""


SHORT = 24  # characters: a cell this short never wraps (names, versions); a longer one wraps at spaces


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def cell(value, title: str = "", css: str = "") -> str:
    """One <td>: text escaped; a status colours it; a title (hover text) escaped too."""
    kind = "num" if _is_number(value) else "short" if len(str(value)) <= SHORT else "long"
    classes = " ".join(c for c in (css or status_class(value), kind) if c)
    hover = f' title="{esc(title)}"' if title else ""
    return f'<td class="{classes}"{hover}>{esc(value)}</td>'


def table(headers: list, rows: list[list], titles: list[list[str]] | None = None,
          classes: list[str] | None = None) -> str:
    """A table of escaped cells; `titles`, parallel to `rows`, gives hover text per cell (e.g. the reason);
    `classes`, one per row, colours a row's first cell (e.g. a comparison's outcome) instead of its status."""
    if not rows:
        return '<p class="empty">(none)</p>'
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        hover = titles[i] if titles else [""] * len(row)
        css = [classes[i] if classes else ""] + [""] * (len(row) - 1)
        body.append("<tr>" + "".join(cell(v, t, c) for v, t, c in zip(row, hover, css)) + "</tr>")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def anchor(title: str) -> str:
    """A stable id for a section title (letters, digits and dashes only)."""
    return "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-") or "section"


def section(title: str, *parts: str, note: str = "", extra: list[str] | None = None, level: int = 2) -> str:
    """<section> with an escaped heading, note and bullet lines around already-built parts."""
    out = [f'<section id="{anchor(title)}"><h{level}>{esc(title)}</h{level}>']
    if note:
        out.append(f'<p class="note">{esc(note)}</p>')
    out += parts
    if extra:
        out.append('<ul class="extra">' + "".join(f"<li>{esc(e)}</li>" for e in extra) + "</ul>")
    return "".join(out) + "</section>"


def from_section(sec: Section, *charts: str, titles: list[list[str]] | None = None) -> str:
    """A report Section (the same value report.md renders) as HTML, with charts before its table."""
    return section(sec.title, *charts, table(sec.headers, sec.rows, titles), note=sec.note, extra=sec.extra)


def figure(svg: str, caption: str = "") -> str:
    """An inline chart (SVG from charts.py) with an escaped caption."""
    return f"<figure>{svg}" + (f"<figcaption>{esc(caption)}</figcaption>" if caption else "") + "</figure>"


def legend() -> str:
    """Which colour means what, naming the statuses of each colour."""
    chips = []
    for name, meaning in MEANING.items():
        names = [s for s in status.ALL if STATUS_STYLE.get(s) == name]
        chips.append(f'<span class="st-{name}">{esc(", ".join(names))}: {esc(meaning)}</span>')
    return '<div class="legend">' + "".join(chips) + "</div>"


def nav(titles: list[str]) -> str:
    return "<nav>" + "".join(f'<a href="#{anchor(t)}">{esc(t)}</a>' for t in titles) + "</nav>"


def document(title: str, body: list[str]) -> str:
    """The whole page: one file, no script, nothing fetched (see CSP)."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">'
            f"<title>{esc(title)}</title><style>{CSS}</style></head>\n<body><main>\n"
            + "\n".join(body) + "\n</main></body></html>\n")
