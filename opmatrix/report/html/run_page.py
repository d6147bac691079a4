"""report.html: one run as a page. The same Section values report.md renders (opmatrix.report.sections), in the
order a reader asks: verdicts, coverage (coloured, the reason on hover), correctness, per-kernel speed-up charts
above their tables, the roofline, compile and tuning time, measurement quality, failures, environments.

Nothing here computes a fact of its own: tables are the sections' rows, speed-ups are performance.speedup_point
of performance.timed_rows (the numbers the tables state), and the roofline plots the stored tflops, flops,
min_bytes and measured ceilings of those rows.
"""
from __future__ import annotations

from pathlib import Path

from opmatrix.manifest import RunManifest
from opmatrix.matrix import DEFAULT_BASELINE
from opmatrix.report.html import charts
from opmatrix.report.html.page import document, esc, figure, from_section, legend, nav, section
from opmatrix.report.markdown import header
from opmatrix.report.performance import speedup_point, timed_rows
from opmatrix.report.quality import autotuning, crosscheck, measurement
from opmatrix.report.sections import (compile_times, correctness, coverage, coverage_reasons, environments,
                                       failures, performance)
from opmatrix.report.table import Section, present
from opmatrix.report.verdicts import verdict_section

ROOFLINE = "Roofline"
ROOFLINE_NOTE = ("each timed row at its arithmetic intensity (the kernel's FLOPs over the least bytes it must move) "
                 "and its achieved TFLOP/s; dashed: min(matmul ceiling of the dtype, copy ceiling x intensity), "
                 "both measured in the cell. Points above a roof beat the ceiling measured there (see Measurement "
                 "quality: a power cap during the ceiling measurement)")


def run_page(df, manifest: RunManifest, verdicts=None) -> str:
    """The page of one run (the rows of its store, its manifest, its verdicts when timed in rounds)."""
    baseline = manifest.baseline or DEFAULT_BASELINE
    timed = timed_rows(df)
    parts: list[tuple[str, str]] = []  # (title, html) in page order
    if verdicts:
        parts.append(("Verdicts", from_section(verdict_section(verdicts))))
    parts.append(("Coverage", from_section(coverage(df), legend(), titles=coverage_reasons(df))))
    parts.append(("Correctness", from_section(correctness(df))))
    parts += [(sec.title, _performance(sec, timed, baseline)) for sec in performance(df)]
    parts.append((ROOFLINE, _roofline(timed)))
    for sec in (compile_times(df), autotuning(df), measurement(df), crosscheck(df), failures(df), environments(df)):
        if sec.rows or not sec.optional:
            parts.append((sec.title, from_section(sec)))
    return document(f"opmatrix run {manifest.run_id}",
                    _header(df, manifest) + [nav([t for t, _ in parts])] + [html for _, html in parts])


def write_run_page(df, manifest: RunManifest, path: Path, verdicts=None) -> Path:
    path.write_text(run_page(df, manifest, verdicts), encoding="utf-8")
    return path


def _header(df, manifest: RunManifest) -> list[str]:
    """report.md's header lines (opmatrix.report.markdown.header) as text: the same facts, without Markdown marks."""
    lines = [line.replace("`", "").replace("**", "") for line in header(df, manifest)[1:] if line.strip()]
    return [f"<h1>opmatrix run {esc(manifest.run_id)}</h1>"] + [f'<p class="note">{esc(line)}</p>' for line in lines]


def speedup_points(k, baseline: str):
    """One kernel's timed rows as chart points (performance.speedup_point), the baseline itself left out."""
    points = k[k.label != baseline].copy()
    values = [speedup_point(r) for r in points.itertuples()]
    points["speedup"] = [v[0] for v in values]
    points["lo"] = [v[1] for v in values]
    points["hi"] = [v[2] for v in values]
    points["case"] = points.workload + " " + points.dtype
    return points[points.speedup.map(present)]


def _performance(sec: Section, timed, baseline: str) -> str:
    kernel = sec.title.removeprefix("Performance: ")
    points = speedup_points(timed[timed.kernel == kernel], baseline) if sec.rows else timed.iloc[0:0]
    if not len(points):
        return from_section(sec)
    paired = points.lo.map(present).any()
    caption = (f"{kernel}: speed-up of each backend against {baseline} per workload and dtype"
               + ("; error bars: 95% bootstrap interval of the paired per-round ratio" if paired else
                  "; ratio of medians (not timed in rounds: no interval)"))
    return from_section(sec, figure(charts.speedup_chart(points, f"speedup-{kernel}"), caption))


def roofline_points(timed):
    """Timed rows with a rate, an intensity and a measured matmul ceiling: what the roofline can place."""
    ok = timed[timed.tflops.map(present) & (timed.tflops > 0) & timed.flops.map(present) & (timed.flops > 0)
               & timed.min_bytes.map(present) & (timed.min_bytes > 0) & timed.ceiling_tflops.map(present)].copy()
    ok["intensity"] = ok.flops / ok.min_bytes
    return ok


def _roofline(timed) -> str:
    points = roofline_points(timed)
    if not len(points):
        return section(ROOFLINE, '<p class="empty">(no timed row with FLOPs, bytes and measured ceilings)</p>',
                       note=ROOFLINE_NOTE)
    return section(ROOFLINE, figure(charts.roofline_chart(points, "roofline")), note=ROOFLINE_NOTE)
