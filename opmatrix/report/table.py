"""What every section is made of: a Section value, number formatting, and the toolchain column rule.

A run can put one device under several toolchains (cells `h200.host-a`, `h200.host-b`); comparing toolchains is
the headline use of a matrix. A table that groups by device alone would merge or drop one toolchain's rows, so
every section groups by (device, toolchain), and shows a `toolchain` column wherever one of its groups would
otherwise mix toolchains. Runs with one toolchain per device keep their compact tables.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Section:
    title: str
    headers: list[str]
    rows: list[list]
    note: str = ""
    extra: list[str] = field(default_factory=list)
    optional: bool = False  # left out of report.md when it has no rows (a run that did not ask for it)


def present(value) -> bool:
    """A stored number that is really there (the loader stores missing numbers as NaN)."""
    return value is not None and value == value


def fmt(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.{digits}g}" if isinstance(value, float) else str(value)


def mixes_toolchains(df, by: list[str]) -> bool:
    """Whether some group of `by` holds rows of more than one toolchain: then `toolchain` must be a key column."""
    if df.empty:
        return False
    return bool((df.groupby(by).toolchain.nunique() > 1).any())


def with_toolchain(headers: list[str], after: str, split: bool) -> list[str]:
    """headers with `toolchain` inserted after the column `after` when the table mixes toolchains."""
    if not split:
        return list(headers)
    at = headers.index(after) + 1
    return headers[:at] + ["toolchain"] + headers[at:]


def key_cells(values: list, toolchain: str, split: bool) -> list:
    """A row's key columns, with its toolchain appended when the table shows that column (see with_toolchain)."""
    return list(values) + ([toolchain] if split else [])
