"""The report's sections, built from the store's DataFrame only (never live objects).

Sections: environments, coverage grid (kernel x backend x device; report.coverage), correctness, performance with
speed-up against the framework baseline, the Nsight Compute profile and the compute-sanitizer outcome where the run
asked for them (report.tools), measurement quality, CUPTI cross-check, autotuning, compile times, failures.
Each is built once as a Section (title, headers, rows, note, extra lines) and rendered by either writer
(report.markdown, report.terminal), so report.md and the terminal never disagree.
"""
from __future__ import annotations

import weakref

from opmatrix.core import status
from opmatrix.core.result import backend_label
from opmatrix.report.coverage import coverage, coverage_cell, coverage_reasons  # noqa: F401 (run_page's too)
from opmatrix.report.performance import performance
from opmatrix.report.quality import autotuning, crosscheck, measurement
from opmatrix.report.tools import profile, sanitized
from opmatrix.report.verdicts import verdict_section
from opmatrix.report.table import Section, fmt, key_cells, mixes_toolchains, with_toolchain
from opmatrix.store import frame_rows

ENV_COLUMNS = ["cell", "host", "device_name", "arch", "driver", "runtime", "python", "torch", "tilelang", "triton"]
COMPILE_TITLE = "Compile time (s, first call included)"


def environments(df) -> Section:
    env = df[df.status != status.NO_HOST].drop_duplicates("cell")
    rows = [[r[c] for c in ENV_COLUMNS] for _, r in env.iterrows()]
    return Section("Environments", ENV_COLUMNS, rows, "versions are the ones imported inside each cell")


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


def reason(error) -> str:
    """A failed row's reason: the first line of its error, whole (the traceback below it stays in results.jsonl).
    The terminal shortens it (report.terminal); report.md and report.html keep all of it."""
    lines = (error or "").strip().splitlines()
    return lines[0] if lines else ""


def failures(df) -> Section:
    bad = df[~df.status.isin([status.OK, status.NO_HOST])]
    split = mixes_toolchains(bad, ["device"])
    rows = [key_cells([r.device], r.toolchain, split)
            + [r.kernel, r.workload, r.dtype, backend_label(r.backend, r.variant), r.status,
               reason(r.error)] for r in frame_rows(bad)]
    hosts = df[df.status == status.NO_HOST].drop_duplicates("device")
    extra = [f"`{r.device}`: no host ({r.error})" for r in frame_rows(hosts)]
    headers = with_toolchain(["device", "kernel", "workload", "dtype", "backend", "status", "reason"], "device",
                             split)
    return Section("Not run, unsupported or failed", headers, rows, extra=extra)


def sections(df, verdicts=None) -> list[Section]:
    """Every section in report order; the verdicts first when the run has them (paired timing). A run's report
    renders one frame three ways (report.md, report.html, the terminal): the sections of the last (frame, verdicts)
    asked for are kept and handed out again, so each table of a 200,000-row run is built once. Frames are not
    changed in place once decided (run.decided makes new ones), which is what makes the frame's identity a key."""
    global _LAST
    frame, given, built = _LAST
    if frame() is df and given is verdicts:
        return built
    built = _build(df, verdicts)
    _LAST = (weakref.ref(df), verdicts, built)
    return built


_LAST: tuple = (lambda: None, None, [])  # (weak reference to the frame, its verdicts, their sections)


def _build(df, verdicts) -> list[Section]:
    first = [verdict_section(verdicts)] if verdicts else []
    return first + [environments(df), coverage(df), correctness(df), *performance(df), profile(df), sanitized(df),
                    measurement(df), crosscheck(df), autotuning(df), compile_times(df), failures(df)]
