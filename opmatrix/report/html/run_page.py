"""report.html: one run as a page. The same Section values report.md renders (opmatrix.report.sections), in the
order a reader asks: verdicts, coverage (coloured, the reason on hover), correctness, per-kernel speed-up charts
above their tables, the roofline, the Nsight Compute profile and the sanitizer's findings (where the run asked for
them), compile and tuning time, measurement quality, failures, environments.

Nothing here computes a fact of its own: tables are the sections' rows, speed-ups are performance.speedup_point
of performance.timed_rows (the numbers the tables state), and the roofline plots the stored tflops, flops,
min_bytes and measured ceilings of those rows.
"""
from __future__ import annotations

from pathlib import Path

from opmatrix.manifest import RunManifest
from opmatrix.report.html import charts
from opmatrix.report.html.page import document, esc, figure, from_section, legend, nav, section
from opmatrix.report.markdown import header
from opmatrix.report.performance import speedup_point, timed_rows
from opmatrix.report.sections import COMPILE_TITLE, coverage_reasons, sections
from opmatrix.report.table import Section, present
from opmatrix.report.tools import PROFILE_TITLE, SANITIZER_TITLE

ROOFLINE = "Roofline"
ROOFLINE_NOTE = ("each timed row at its arithmetic intensity (the kernel's FLOPs over the least bytes it must move) "
                 "and its achieved TFLOP/s; dashed: min(matmul ceiling of the dtype, copy ceiling x intensity), "
                 "both measured in the cell. Points above a roof beat the ceiling measured there (see Measurement "
                 "quality: a power cap during the ceiling measurement)")


def run_page(df, manifest: RunManifest, verdicts=None) -> str:
    """The page of one run (the rows of its store, its manifest, its verdicts when timed in rounds)."""
    baseline = manifest.acceptance.baseline
    timed = timed_rows(df)
    built = sections(df, verdicts)  # the very sections report.md and the terminal show, built once
    by_title = {sec.title: sec for sec in built}
    parts: list[tuple[str, str]] = []  # (title, html) in page order
    if verdicts:
        parts.append(("Verdicts", from_section(by_title["Verdicts"])))
    parts.append(("Coverage", from_section(by_title["Coverage"], legend(), titles=coverage_reasons(df))))
    parts.append(("Correctness", from_section(by_title["Correctness"])))
    parts += [(sec.title, _performance(sec, timed, baseline)) for sec in built if sec.title.startswith("Performance")]
    parts.append((ROOFLINE, _roofline(timed)))
    for title in (PROFILE_TITLE, SANITIZER_TITLE, COMPILE_TITLE, "Autotuning", "Measurement quality",
                  "Cross-check against CUPTI", "Not run, unsupported or failed", "Environments"):
        sec = by_title[title]
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


CASES_DRAWN = 12  # workload x dtype cases a speed-up chart draws one by one; beyond it, their spread per backend
ROOFLINE_POINTS = 3000  # the roofline places at most this many rows (each is an element of the page)


def speedup_points(k, baseline: str):
    """One kernel's timed rows as chart points (performance.speedup_point), the baseline itself left out."""
    columns = [c for c in ("device", "toolchain", "label", "workload", "dtype", "speedup", "speedup_lo", "speedup_hi",
                           "speedup_vs_framework") if c in k.columns]
    points = k.loc[k.label != baseline, columns].copy()
    values = [speedup_point(r) for r in points.itertuples()]
    points["speedup"] = [v[0] for v in values]
    points["lo"] = [v[1] for v in values]
    points["hi"] = [v[2] for v in values]
    points["case"] = points.workload + " " + points.dtype
    return points[points.speedup.map(present)]


def spread_points(points):
    """Per (device, toolchain, backend): the median speed-up over its workload x dtype cases, from the 10th to the
    90th percentile of them as its bar: what a chart of hundreds of cases can show (the table has each one)."""
    grouped = points.groupby(["device", "toolchain", "label"]).speedup
    out = grouped.median().rename("speedup").to_frame()
    out["lo"], out["hi"] = grouped.quantile(0.1), grouped.quantile(0.9)
    out["case"] = "median of the cases; bar: 10th to 90th percentile"
    return out.reset_index()


def _performance(sec: Section, timed, baseline: str) -> str:
    kernel = sec.title.removeprefix("Performance: ")
    points = speedup_points(timed[timed.kernel == kernel], baseline) if sec.rows else timed.iloc[0:0]
    if not len(points):
        return from_section(sec)
    cases = points.case.nunique()
    if cases > CASES_DRAWN:
        caption = (f"{kernel}: speed-up of each backend against {baseline} over its {cases} workload x dtype cases: "
                   "the median of the cases, the bar from their 10th to their 90th percentile (every case is in "
                   "the table)")
        return from_section(sec, figure(charts.speedup_chart(spread_points(points), f"speedup-{kernel}"), caption))
    paired = points.lo.map(present).any()
    caption = (f"{kernel}: speed-up of each backend against {baseline} per workload and dtype"
               + ("; error bars: 95% interval of the median paired per-round ratio (rounds and processes)"
                  if paired else
                  "; ratio of medians (not timed in rounds: no interval)"))
    return from_section(sec, figure(charts.speedup_chart(points, f"speedup-{kernel}"), caption))


def roofline_points(timed):
    """Timed rows with a rate, an intensity and a measured matmul ceiling: what the roofline can place. Beyond
    ROOFLINE_POINTS, the fastest row of each (device, toolchain, kernel, workload, dtype), then, if still too many,
    rows evenly spaced in intensity order (roofline_note says so)."""
    ok = timed[(timed.tflops > 0) & (timed.flops > 0) & (timed.min_bytes > 0) & timed.ceiling_tflops.notna()]
    ok = ok[["device", "toolchain", "kernel", "workload", "dtype", "tflops", "flops", "min_bytes", "ceiling_tflops",
             "ceiling_gbps"]].copy()
    ok["intensity"] = ok.flops / ok.min_bytes
    if len(ok) > ROOFLINE_POINTS:
        ok = ok.sort_values("tflops", ascending=False, kind="stable").drop_duplicates(
            ["device", "toolchain", "kernel", "workload", "dtype"])
    if len(ok) > ROOFLINE_POINTS:
        ok = ok.sort_values("intensity", kind="stable")
        ok = ok.iloc[[round(i * (len(ok) - 1) / (ROOFLINE_POINTS - 1)) for i in range(ROOFLINE_POINTS)]]
    return ok


def roofline_note(timed, placed: int) -> str:
    left = int(((timed.tflops > 0) & (timed.flops > 0) & (timed.min_bytes > 0) & timed.ceiling_tflops.notna()).sum())
    if placed == left:
        return ROOFLINE_NOTE
    return (ROOFLINE_NOTE + f". {placed} of {left} rows placed (at most {ROOFLINE_POINTS}: the fastest backend of each "
            "workload and dtype, then rows evenly spaced in intensity)")


def _roofline(timed) -> str:
    points = roofline_points(timed)
    if not len(points):
        return section(ROOFLINE, '<p class="empty">(no timed row with FLOPs, bytes and measured ceilings)</p>',
                       note=ROOFLINE_NOTE)
    return section(ROOFLINE, figure(charts.roofline_chart(points, "roofline")), note=roofline_note(timed, len(points)))
