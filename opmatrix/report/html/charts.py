"""The charts of the HTML pages: matplotlib figures rendered to inline SVG (no JavaScript, nothing fetched).

Text stays text in the SVG (svg.fonttype none: smaller, selectable, rendered by the browser's fonts); matplotlib
escapes it as XML, and math parsing is off, so a label from results (`$x$`, `<script>`) is drawn as written.
Each chart gets its own id salt (svg.hashsalt): several charts in one page never share an element id, and the same
data renders to the same bytes. Charts are built on matplotlib.figure.Figure directly: no pyplot, no global
figure state. Colours: one per backend label (speed-ups) or per kernel (roofline), from the tab10/tab20 cycles.
"""
from __future__ import annotations

import hashlib
import html
import io
import math
import re

from opmatrix.core.text import visible
from opmatrix.report.table import present

RC = {"svg.fonttype": "none", "text.parse_math": False, "font.size": 9, "axes.titlesize": 10,
      "axes.labelsize": 9, "legend.fontsize": 8, "xtick.labelsize": 8, "ytick.labelsize": 8,
      "axes.spines.top": False, "axes.spines.right": False, "font.family": "sans-serif"}
WIDTH_IN = 12.0  # inches at 96 px: 1152 px, the page's content width at 1280 px
DPI = 96


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def to_svg(fig, salt: str) -> str:
    """The figure as an inline <svg> element (no XML prolog), deterministic for the same data and salt."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    svg = _own_ids(visible(text[text.index("<svg"):]), salt)  # a label's control character: invalid XML
    return svg.replace("<svg ", f'<svg role="img" data-chart="{html.escape(salt, quote=True)}" ', 1)


_ID = re.compile(r'(\sid="|url\(#|href="#)([^")]+)')


def _own_ids(svg: str, salt: str) -> str:
    """Every id of the chart, and every reference to one, prefixed with the chart's own prefix: matplotlib numbers
    its groups per figure (figure_1, patch_1, ...), so two charts in one page would share ids."""
    prefix = re.sub(r"[^A-Za-z0-9_-]", "_", salt)[:32] + "-" + hashlib.sha1(salt.encode()).hexdigest()[:6]
    return _ID.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", svg)


def _colours(names: list[str], cmap: str = "tab10") -> dict[str, tuple]:
    from matplotlib import colormaps

    colours = colormaps[cmap if len(names) <= 10 else "tab20"].colors
    return {n: colours[i % len(colours)] for i, n in enumerate(names)}


def _rc():
    import matplotlib

    return matplotlib.rc_context(RC)


# ---- run page -------------------------------------------------------------------------------------------------

def speedup_chart(points, salt: str) -> str:
    """Speed-up against the framework baseline per backend x (workload, dtype), one panel per (device,
    toolchain): a dot per estimate, its 95 % interval as a bar where the timing was paired. `points`: rows with
    device, toolchain, label, case ("workload dtype"), speedup, lo, hi (lo/hi NaN without an interval). Log
    scale (a ratio: 2x and 0.5x lie equally far from 1); the line at 1.0 is the baseline."""
    panels = sorted(points.groupby(["device", "toolchain"]).groups)
    cases = sorted(points.case.unique())
    colours = _colours(cases)
    heights = [len(points[(points.device == d) & (points.toolchain == t)].label.unique()) * (0.06 * len(cases)
               + 0.14) + 0.75 for d, t in panels]
    with _rc():
        fig = _figure(WIDTH_IN, sum(heights) + 0.35)
        axes = fig.subplots(len(panels), 1, squeeze=False, height_ratios=heights)
        for ax, (device, toolchain) in zip(axes[:, 0], panels):
            _speedup_panel(ax, points[(points.device == device) & (points.toolchain == toolchain)], cases, colours)
            ax.set_title(f"{device} · {toolchain}", loc="left")
        handles = [_dot(colours[c]) for c in cases]
        fig.legend(handles, cases, loc="outside upper center", ncols=min(len(cases), 4), frameon=False)
        return to_svg(fig, salt)


def _dot(colour):
    from matplotlib.lines import Line2D

    return Line2D([], [], marker="o", linestyle="", color=colour)


def _patch(colour):
    from matplotlib.patches import Patch

    return Patch(facecolor=colour)


def _speedup_panel(ax, p, cases: list[str], colours: dict) -> None:
    order = p.groupby("label").speedup.median().sort_values().index.tolist()  # fastest at the top
    step = 0.7 / len(cases)
    for j, case in enumerate(cases):
        sub = p[p.case == case].set_index("label")
        at = [(i, sub.loc[label]) for i, label in enumerate(order) if label in sub.index]
        ys = [i - 0.35 + step * (j + 0.5) for i, _ in at]
        xs = [r.speedup for _, r in at]
        lo = [r.speedup - r.lo if present(r.lo) else 0.0 for _, r in at]
        hi = [r.hi - r.speedup if present(r.hi) else 0.0 for _, r in at]
        ax.errorbar(xs, ys, xerr=[lo, hi], fmt="o", markersize=3.5, color=colours[case], elinewidth=1.2,
                    capsize=0)
    ax.axvline(1.0, color="#222", linewidth=1)
    for i in range(len(order) - 1):
        ax.axhline(i + 0.5, color="#eee", linewidth=0.6)
    ax.set_yticks(range(len(order)), order)
    ax.set_ylim(-0.5, len(order) - 0.5)
    values = [v for col in ("speedup", "lo", "hi") for v in p[col] if present(v) and v > 0] + [1.0]
    _log_axis(ax.xaxis, ax.set_xscale, suffix="x", span=max(values) / min(values))
    ax.set_xlim(min(values) / 1.05, max(values) * 1.05)
    ax.set_xlabel("speed-up against the framework baseline (x, log scale; > 1 is faster)")
    ax.grid(axis="x", which="both", color="#e6e6e6", linewidth=0.6)
    ax.set_axisbelow(True)


def _log_axis(axis, set_scale, suffix: str = "", span: float = 10.0) -> None:
    """A log axis labelled in plain numbers (math text is off, so matplotlib's 10^k labels are replaced); a narrow
    span (max / min under 4) gets evenly spaced ticks, else 1-2-5 ticks per decade."""
    from matplotlib.ticker import AutoLocator, FuncFormatter, LogLocator, NullFormatter

    set_scale("log")
    axis.set_major_locator(AutoLocator() if span < 4 else LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}{suffix}"))
    axis.set_minor_formatter(NullFormatter())


def roofline_chart(points, salt: str) -> str:
    """Achieved TFLOP/s against arithmetic intensity (FLOP per byte of the least traffic) per (device,
    toolchain), under the rooflines of its measured ceilings: min(matmul ceiling per dtype, copy ceiling x
    intensity). `points`: rows with device, toolchain, kernel, dtype, intensity, tflops, ceiling_tflops,
    ceiling_gbps."""
    panels = sorted(points.groupby(["device", "toolchain"]).groups)
    kernels = sorted(points.kernel.unique())
    colours = _colours(kernels)
    markers = dict(zip(sorted(points.dtype.unique()), "os^Dvx*"))
    with _rc():
        fig = _figure(WIDTH_IN, 4.2 * math.ceil(len(panels) / 2))
        axes = fig.subplots(math.ceil(len(panels) / 2), min(len(panels), 2), squeeze=False)
        for ax, (device, toolchain) in zip(axes.flat, panels):
            p = points[(points.device == device) & (points.toolchain == toolchain)]
            _roofs(ax, p)
            for (kernel, dtype), g in p.groupby(["kernel", "dtype"]):
                ax.scatter(g.intensity, g.tflops, s=18, color=colours[kernel], marker=markers[dtype],
                           label=f"{kernel} {dtype}", alpha=0.85, linewidths=0.8)
            _log_axis(ax.xaxis, ax.set_xscale)
            _log_axis(ax.yaxis, ax.set_yscale)
            ax.set_xlabel("arithmetic intensity (FLOP per byte moved, at least)")
            ax.set_ylabel("achieved TFLOP/s")
            ax.set_title(f"{device} · {toolchain}", loc="left")
            ax.grid(which="major", color="#e3e3e3", linewidth=0.6)
        for ax in axes.flat[len(panels):]:
            ax.set_visible(False)
        handles = {}
        for ax in axes.flat[:len(panels)]:
            handles.update(zip(*reversed(ax.get_legend_handles_labels())))
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", frameon=False,
                   ncols=min(len(handles), 4))
        return to_svg(fig, salt)


def _roofs(ax, p) -> None:
    """The roofline of each dtype's matmul ceiling with the cell's copy ceiling, labelled with both numbers."""
    import numpy as np

    lo, hi = p.intensity.min() / 3, p.intensity.max() * 3
    gbps = p.ceiling_gbps.dropna()
    peaks = {d: v for d, v in p.groupby("dtype").ceiling_tflops.first().items() if present(v)}
    x = np.geomspace(lo, hi, 200)
    for peak in peaks.values():
        roof = np.minimum(peak, gbps.iloc[0] * x / 1e3) if len(gbps) else np.full_like(x, peak)
        ax.plot(x, roof, color="#555", linewidth=1, linestyle="--")
    if peaks:  # left of the ridge point, where no point of a compute-bound kernel sits
        top = max(peaks.values())
        ridge = min(max(top * 1e3 / gbps.iloc[0], lo), hi) if len(gbps) else hi
        text = ", ".join(f"{d} {v:.3g}" for d, v in sorted(peaks.items()))
        ax.annotate(f"matmul ceiling (TFLOP/s): {text}", (ridge, top), xytext=(-6, 3), textcoords="offset points",
                    ha="right", va="bottom", fontsize=7.5, color="#444")
    if len(gbps):
        ax.annotate(f"copy ceiling {gbps.iloc[0]:.4g} GB/s", (lo * 1.2, gbps.iloc[0] * lo * 1.2 / 1e3),
                    xytext=(4, -6), textcoords="offset points", ha="left", va="top", fontsize=7.5, color="#444")


# ---- comparison page ------------------------------------------------------------------------------------------

OUTCOME_COLOUR = {"breaks": "#c62828", "risk": "#ef8f00", "improved": "#2e7d32", "same": "#607d8b",
                  "not compared": "#9e9e9e"}


def before_after_chart(rows, threshold: float | None, salt: str) -> str:
    """Time after / time before per compared row (the candidate's time over the baseline's) with its 95 %
    interval, coloured by outcome; the lines at 1 / threshold and threshold are where faster and slower begin.
    `rows`: RowChange values with a time ratio, in the comparison's order (breaks and risks first)."""
    names = [r.name for r in rows]
    with _rc():
        fig = _figure(WIDTH_IN, 0.24 * len(rows) + 1.2)
        ax = fig.subplots()
        for i, r in enumerate(rows):
            ax.errorbar([r.time_ratio], [i], xerr=[[r.time_ratio - r.time_lo], [r.time_hi - r.time_ratio]],
                        fmt="o", markersize=4, color=OUTCOME_COLOUR.get(r.outcome, "#333"), elinewidth=1,
                        capsize=2)
        ax.axvline(1.0, color="#222", linewidth=1)
        if threshold:
            for x in (threshold, 1 / threshold):
                ax.axvline(x, color="#888", linewidth=0.8, linestyle="--")
        ax.set_yticks(range(len(rows)), names)
        ax.set_ylim(len(rows) - 0.5, -0.5)  # the first row (the worst) at the top
        ax.set_xlabel("time after / before (candidate / baseline; > 1 is slower); dashed: the thresholds")
        ax.grid(axis="x", color="#ddd", linewidth=0.6)
        handles = [_patch(c) for c in OUTCOME_COLOUR.values()]
        fig.legend(handles, list(OUTCOME_COLOUR), loc="outside upper center", ncols=5, frameon=False)
        return to_svg(fig, salt)


# ---- trend page -----------------------------------------------------------------------------------------------

def trend_chart(trend, salt: str) -> str:
    """One series over the nights (points coloured by toolchain), each change point a dashed line at its first
    night, labelled with the shift's size and what changed in the toolchain."""
    from opmatrix.upgrade.history import short_night

    toolchains = sorted(set(trend.toolchains))
    colours = _colours(toolchains)
    with _rc():
        fig = _figure(WIDTH_IN / 2 - 0.1, 2.6)
        ax = fig.subplots()
        xs = list(range(len(trend.values)))
        ax.plot(xs, trend.values, color="#999", linewidth=0.8)
        for name in toolchains:
            at = [i for i, t in enumerate(trend.toolchains) if t == name]
            ax.scatter(at, [trend.values[i] for i in at], s=14, color=colours[name], label=name, zorder=3)
        for shift in trend.shifts:
            ax.axvline(shift.index - 0.5, color="#c62828", linestyle="--", linewidth=1)
            ax.annotate(f"x{shift.ratio:.3f}: {shift.changed}", (shift.index - 0.5, 1), xycoords=("data",
                        "axes fraction"), ha="left", va="top", fontsize=7, color="#c62828", wrap=True)
        ax.set_xticks(xs, [short_night(n)[5:] for n in trend.nights], rotation=35, ha="right")
        ax.set_ylabel(trend.metric)
        ax.set_title(trend.label(), loc="left", fontsize=9)
        ax.grid(axis="y", color="#e3e3e3", linewidth=0.6)
        if len(toolchains) > 1:
            ax.legend(frameon=False, loc="best")
        return to_svg(fig, salt)
