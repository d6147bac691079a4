"""The coverage grid: one entry per kernel x backend x device (or per cell, where a device ran under several
toolchains) over all its workloads and dtypes, and, for the HTML page's hover text, why each entry is what it is.

A device that no host of the run has is one line under the grid, not a column: every one of its entries would say
`no_host` (a default matrix plans hundreds of such jobs, and they drowned the rows that ran). Its rows are still
stored, one per job. A device with some answer without a host (`compiles`, `lowers`, `unsupported`) keeps its
column.

The rows of each entry are found in one pass (their positions per kernel, backend, variant and device), so the grid
of a 200,000-row run is not built by filtering the whole frame once per entry.
"""
from __future__ import annotations

from collections import Counter

from opmatrix.core import status
from opmatrix.core.result import backend_label
from opmatrix.core.text import shorten
from opmatrix.report.table import Section, mixes_toolchains

COVERAGE_NOTE = ("one entry per kernel x backend x device over all its workloads and dtypes; `no_host`: no host of "
                 "this run has the device; `compiles` / `lowers`: no host has it, but a binary / device source for "
                 "it was built on another host (never run, so not `ok`); `unsupported` with no `ok` on a device "
                 "means that device needs another implementation")
PER_CELL_NOTE = "; a device that ran under several toolchains has one column per cell (`device.toolchain`)"
NO_HOST_NOTE = "; a device no host of the run has is one line below the grid instead of a column of `no_host`"
REASONS_SHOWN = 6
HOVER_CHARS = 200  # a reason in a coverage entry's hover text, cut at a word with "..."


def entry_text(statuses: list[str], timers: list[str]) -> str:
    """One entry from its rows' statuses (and timers): "ok", "ok (correctness only)", "ok 6/8, unsupported 2/8"
    (most frequent first, ties in the order the rows came)."""
    counts = Counter(statuses).most_common()
    if len(counts) == 1:
        only = counts[0][0]
        if only == status.OK and all(t == "correctness-only" for t in timers):
            return "ok (correctness only)"
        return only
    return ", ".join(f"{s} {n}/{len(statuses)}" for s, n in counts)


def coverage_cell(group) -> str:
    """entry_text of a frame's rows (the correctness table's status column)."""
    return entry_text(list(group.status), list(group.timer))


def hostless_devices(df) -> list[str]:
    """Devices every row of which is `no_host`: collapsed to one line each."""
    if df.empty:
        return []
    hosted = df.status.ne(status.NO_HOST).groupby(df.device).any()
    return sorted(hosted.index[~hosted.to_numpy()])


def _columns(df, collapsed: list[str]) -> list[tuple[str, str, str | None]]:
    """(header, device, toolchain or None): one column per device, or per cell for a device whose entries would
    otherwise merge two toolchains; none for a collapsed device."""
    split = mixes_toolchains(df, ["kernel", "backend", "variant", "device"])
    pairs = df[["device", "toolchain"]].drop_duplicates()
    columns = []
    for device in sorted(set(pairs.device) - set(collapsed)):
        toolchains = sorted(pairs[pairs.device == device].toolchain)
        if split and len(toolchains) > 1:
            columns += [(f"{device}.{t}", device, t) for t in toolchains]
        else:
            columns.append((device, device, None))
    return columns


def _entries(df, columns):
    """Per grid row, in the table's order: (kernel, backend label, the row positions of each column's entry)."""
    where = df.groupby(["kernel", "backend", "variant", "device"], sort=False).indices
    toolchain = df.toolchain.to_numpy()
    for kernel, backend, variant in sorted({key[:3] for key in where}):
        subs = []
        for _, device, chain in columns:
            at = where.get((kernel, backend, variant, device), ())
            subs.append([p for p in at if chain is None or toolchain[p] == chain])
        yield kernel, backend_label(backend, variant), subs


def coverage(df) -> Section:
    collapsed = hostless_devices(df)
    columns = _columns(df, collapsed)
    st, timer = df.status.to_numpy(), df.timer.to_numpy()
    rows = [[kernel, label] + [entry_text([st[p] for p in at], [timer[p] for p in at]) if at else "" for at in subs]
            for kernel, label, subs in _entries(df, columns)]
    note = (COVERAGE_NOTE + (PER_CELL_NOTE if any(c[2] is not None for c in columns) else "")
            + (NO_HOST_NOTE if collapsed else ""))
    jobs = df[df.device.isin(collapsed)].groupby("device").size()
    extra = [f"`{device}`: `no_host` for all {jobs[device]} of its jobs (no host of this run has it; each is a "
             "stored row)" for device in collapsed]
    return Section("Coverage", ["kernel", "backend"] + [c[0] for c in columns], rows, note, extra)


def coverage_reasons(df) -> list[list[str]]:
    """Parallel to coverage(df).rows: per entry, why it is what it is (hover text in the HTML grid): each
    distinct status and reason of its rows that are not `ok`, with the workloads it hit."""
    columns = _columns(df, hostless_devices(df))
    values = {c: df[c].to_numpy() for c in ("status", "error", "workload", "dtype")}
    return [["", ""] + [_reasons(at, values) for at in subs] for _, _, subs in _entries(df, columns)]


def _reasons(at: list[int], values: dict) -> str:
    if not at:
        return ""
    bad = [p for p in at if values["status"][p] != status.OK]
    lines = [f"ok on {len(at) - len(bad)} of {len(at)} workload x dtype"] if len(bad) < len(at) else []
    seen: dict[tuple[str, str], list[str]] = {}
    for p in bad:
        error = values["error"][p]
        first = (error or "").strip().splitlines() if isinstance(error, str) else []
        why = shorten(first[0], HOVER_CHARS) if first else ""  # the whole of it: Not run, unsupported or failed
        seen.setdefault((values["status"][p], why), []).append(f"{values['workload'][p]} {values['dtype'][p]}")
    for (state, why), cases in list(seen.items())[:REASONS_SHOWN]:
        lines.append(f"{state} ({', '.join(cases[:3])}{', ...' if len(cases) > 3 else ''})" + (f": {why}" if why
                                                                                                else ""))
    if len(seen) > REASONS_SHOWN:
        lines.append(f"... and {len(seen) - REASONS_SHOWN} more reasons (see Not run, unsupported or failed)")
    return "\n".join(lines)
