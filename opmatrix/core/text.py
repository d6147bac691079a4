"""Text that came from a kernel, a compiler or a worker, made safe to show: the one place control characters are
handled.

An error text or a stderr tail is whatever a compiler, a kernel or a dying process wrote. Shown raw, an escape
sequence in it acts on the reader's terminal (`\\x1b[2J` clears the screen, `\\x1b]0;...\\x07` sets its title),
sits raw in report.md (`cat report.md` does the same), makes the JUnit XML invalid (XML 1.0 forbids most control
characters) and hides or reorders text in a browser (bidirectional overrides). rich's markup escaping and HTML
escaping handle `[` and `<`, not these.

`visible` keeps every character a reader can see and writes every other one as its escape, `\\x1b`, `\\u202e`, so
the text stays readable and nothing is silently lost: a newline and a tab are kept (they lay out a traceback, and
every output format handles them: Markdown and HTML cells fold newlines themselves); a carriage return becomes a
newline (alone it would let a later text overwrite the start of a line: progress bars of pip and compilers write
it); every other C0 control, DEL, every C1 control (U+0080 to U+009F: 0x9b is a CSI on some terminals) and the
bidirectional embeddings, overrides and isolates are written out. Applying it twice changes nothing.

Applied where a row is serialised and read back (opmatrix.core.result), so every output built from stored rows
(terminal, report.md, report.html, JUnit, JSON) gets safe text at once, and again by the terminal views, which
also show texts that never became a row. Standard library only: cell environments import it.
"""
from __future__ import annotations

import re

# C0 controls but tab (09) and newline (0a), DEL, C1 controls, the bidi embeddings/overrides (202a-202e) and
# isolates (2066-2069). A carriage return (0d) is among them and handled first.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CR = re.compile("\r\n?")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """text with every control character but newline and tab written as its escape (`\\x1b`), a carriage return
    (or CR LF) as a newline; text without any is returned as it is (the common case costs one search)."""
    if not UNSAFE.search(text):
        return text
    return UNSAFE.sub(_escape, _CR.sub("\n", text))


def _strings(value) -> bool:
    """A list of strings (a row's lists are typed: one of numbers, such as its samples, is never walked)."""
    return isinstance(value, list) and bool(value) and isinstance(value[0], str)


def visible_fields(record: dict) -> dict:
    """A record's fields (a row as a dict) with visible() applied to every string and every string in a list; the
    same dict when none holds a control character (one search over all its text: a 200,000-row store is read
    without a call per field)."""
    texts = []
    for v in record.values():
        if isinstance(v, str):
            texts.append(v)
        elif isinstance(v, list) and v and isinstance(v[0], str):  # _strings, inline: called for every field
            texts.extend(x for x in v if isinstance(x, str))
    if not UNSAFE.search("".join(texts)):
        return record
    return {name: visible(v) if isinstance(v, str) else
            [visible(x) if isinstance(x, str) else x for x in v] if _strings(v) else v
            for name, v in record.items()}


def visible_frame(df):
    """A results DataFrame read from a results.parquet written before rows were made safe, with visible() applied
    to the text cells that hold a control character (the others are left as they are)."""
    for name in df.columns:
        column = df[name]
        if column.dtype.kind != "O":  # object and pandas' string dtype; numbers never hold text
            continue
        unsafe = column.map(lambda v: isinstance(v, str) and UNSAFE.search(v) is not None).astype(bool)
        if unsafe.any():
            df.loc[unsafe, name] = column[unsafe].map(visible)
    return df


ELLIPSIS = "..."


def shorten(text: str, limit: int, full_text: str = "") -> str:
    """text as it is when it has at most `limit` characters, else cut at the last space that keeps it within
    `limit`, ending in "..." (a word is cut only when the text has no space in its second half), followed by
    "(full text: FILE)" when `full_text` names the file that holds all of it."""
    if len(text) <= limit:
        return text
    cut = text[:max(limit - len(ELLIPSIS), 1)]
    space = cut.rfind(" ")
    if space > len(cut) // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.") + ELLIPSIS + (f" (full text: {full_text})" if full_text else "")
