"""The report's sections, built from the store's DataFrame only (never live objects).

Sections: environments, coverage grid (kernel x backend x device), correctness, performance with speed-up
against the framework baseline, measurement quality, CUPTI cross-check, autotuning, compile times, failures.
Each is built once as a Section (title, headers, rows, note, extra lines) and rendered by either writer
(report.markdown, report.terminal), so report.md and the terminal never disagree.
"""
from __future__ import annotations

from opmatrix.core import status
from opmatrix.core.result import backend_label
from opmatrix.report.performance import performance
from opmatrix.report.quality import autotuning, crosscheck, measurement
from opmatrix.report.verdicts import verdict_section
from opmatrix.report.table import Section, fmt, key_cells, mixes_toolchains, with_toolchain

ENV_COLUMNS = ["cell", "host", "device_name", "arch", "driver", "runtime", "python", "torch", "tilelang", "triton"]
COMPILE_TITLE = "Compile time (s, first call included)"
COVERAGE_NOTE = ("one entry per kernel x backend x device over all its workloads and dtypes; `no_host`: no host of "
                 "this run has the device; `compiles` / `lowers`: no host has it, but a binary / device source for "
                 "it was built on another host (never run, so not `ok`); `unsupported` with no `ok` on a device "
                 "means that device needs another implementation")
PER_CELL_NOTE = "; a device that ran under several toolchains has one column per cell (`device.toolchain`)"


def coverage_cell(group) -> str:
    counts = group.status.value_counts()
    total = len(group)
    if len(counts) == 1:
        only = counts.index[0]
        if only == status.OK and (group.timer == "correctness-only").all():
            return "ok (correctness only)"
        return only
    return ", ".join(f"{s} {n}/{total}" for s, n in counts.items())


def environments(df) -> Section:
    env = df[df.status != status.NO_HOST].drop_duplicates("cell")
    rows = [[r[c] for c in ENV_COLUMNS] for _, r in env.iterrows()]
    return Section("Environments", ENV_COLUMNS, rows, "versions are the ones imported inside each cell")


def _coverage_columns(df) -> list[tuple[str, str, str | None]]:
    """(header, device, toolchain or None): one column per device, or per cell for a device whose entries would
    otherwise merge two toolchains."""
    split = mixes_toolchains(df, ["kernel", "backend", "variant", "device"])
    columns = []
    for device in sorted(df.device.unique()):
        toolchains = sorted(df[df.device == device].toolchain.unique())
        if split and len(toolchains) > 1:
            columns += [(f"{device}.{t}", device, t) for t in toolchains]
        else:
            columns.append((device, device, None))
    return columns


def _coverage_groups(df, columns):
    """Per coverage row: (kernel, backend label, the rows of each column), in the table's order."""
    for (kernel, backend, variant), group in df.groupby(["kernel", "backend", "variant"], sort=True):
        subs = []
        for _, device, toolchain in columns:
            sub = group[group.device == device]
            subs.append(sub if toolchain is None else sub[sub.toolchain == toolchain])
        yield kernel, backend_label(backend, variant), subs


def coverage(df) -> Section:
    columns = _coverage_columns(df)
    rows = [[kernel, label] + [coverage_cell(sub) if len(sub) else "" for sub in subs]
            for kernel, label, subs in _coverage_groups(df, columns)]
    note = COVERAGE_NOTE + (PER_CELL_NOTE if any(c[2] is not None for c in columns) else "")
    return Section("Coverage", ["kernel", "backend"] + [c[0] for c in columns], rows, note)


def coverage_reasons(df) -> list[list[str]]:
    """Parallel to coverage(df).rows: per entry, why it is what it is (hover text in the HTML grid): each
    distinct status and reason of its rows that are not `ok`, with the workloads it hit."""
    columns = _coverage_columns(df)
    return [["", ""] + [_reasons(sub) for sub in subs] for _, _, subs in _coverage_groups(df, columns)]


REASONS_SHOWN = 6


def _reasons(rows) -> str:
    if not len(rows):
        return ""
    bad = rows[rows.status != status.OK]
    lines = [f"ok on {len(rows) - len(bad)} of {len(rows)} workload x dtype"] if len(bad) < len(rows) else []
    seen: dict[tuple[str, str], list[str]] = {}
    for r in bad.itertuples():
        why = (r.error or "").strip().splitlines()[0][:200] if r.error else ""
        seen.setdefault((r.status, why), []).append(f"{r.workload} {r.dtype}")
    for (state, why), cases in list(seen.items())[:REASONS_SHOWN]:
        lines.append(f"{state} ({', '.join(cases[:3])}{', ...' if len(cases) > 3 else ''})" + (f": {why}" if why
                                                                                                else ""))
    if len(seen) > REASONS_SHOWN:
        lines.append(f"... and {len(seen) - REASONS_SHOWN} more reasons (see Not run, unsupported or failed)")
    return "\n".join(lines)


def correctness(df) -> Section:
    ran = df[df.rel_err.notna() | (df.status == status.MISMATCH)]
    keys = ["device", "kernel", "backend", "variant", "dtype"]
    split = mixes_toolchains(ran, keys)
    rows = []
    for (device, kernel, backend, variant, dtype, toolchain), g in ran.groupby(keys + ["toolchain"]):
        rows.append(key_cells([device, kernel, backend_label(backend, variant), dtype], toolchain, split)
                    + [fmt(g.rel_err.max()), fmt(g.tolerance.iloc[0]), int(g.trials.min()), coverage_cell(g)])
    headers = with_toolchain(["device", "kernel", "backend", "dtype", "worst rel_err", "tolerance", "trials",
                              "status"], "dtype", split)
    return Section("Correctness", headers, rows,
                   "relative error ||out - ref|| / ||ref|| against an fp64 reference, worst over trials with fresh "
                   "seeded inputs; outputs poisoned with NaN before every run")


def compile_times(df) -> Section:
    built = df[df.compile_s.notna()]
    keys = ["device", "kernel", "backend", "variant"]
    split = mixes_toolchains(built, keys)
    rows = []
    for (device, kernel, backend, variant, toolchain), g in built.groupby(keys + ["toolchain"]):
        caches = ", ".join(f"{c} {n}/{len(g)}" if len(set(g.compile_cache)) > 1 else c
                           for c, n in g.compile_cache.value_counts().items())
        rows.append(key_cells([device, kernel, backend_label(backend, variant)], toolchain, split)
                    + [fmt(g.compile_s.median()), fmt(g.compile_s.max()), caches])
    headers = with_toolchain(["device", "kernel", "backend", "median", "max", "cache"], "backend", split)
    return Section(COMPILE_TITLE, headers, rows)


def failures(df) -> Section:
    bad = df[~df.status.isin([status.OK, status.NO_HOST])]
    split = mixes_toolchains(bad, ["device"])
    rows = [key_cells([r.device], r.toolchain, split)
            + [r.kernel, r.workload, r.dtype, backend_label(r.backend, r.variant), r.status,
               (r.error or "").splitlines()[0][:160] if r.error else ""] for r in bad.itertuples()]
    hosts = df[df.status == status.NO_HOST].drop_duplicates("device")
    extra = [f"`{r.device}`: no host ({r.error})" for r in hosts.itertuples()]
    headers = with_toolchain(["device", "kernel", "workload", "dtype", "backend", "status", "reason"], "device",
                             split)
    return Section("Not run, unsupported or failed", headers, rows, extra=extra)


def sections(df, verdicts=None) -> list[Section]:
    """Every section in report order; the verdicts first when the run has them (paired timing)."""
    first = [verdict_section(verdicts)] if verdicts else []
    return first + [environments(df), coverage(df), correctness(df), *performance(df), measurement(df),
                    crosscheck(df), autotuning(df), compile_times(df), failures(df)]
