"""Reports from the store only (never live objects): report.md through tabulate, a terminal view through rich.

Sections: environments, coverage grid (kernel x backend x device), correctness, performance with speed-up
against the framework baseline, failures. Each section is built once as (title, note, headers, rows) and
rendered by either writer.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from opmatrix.core import status
from opmatrix.core.result import backend_label

CROSSCHECK_MIN_MS = 0.05  # the agreement goal applies to calls of at least 50 µs
CROSSCHECK_GOAL_PCT = 3.0
ENV_COLUMNS = ["cell", "host", "device_name", "arch", "driver", "runtime", "python", "torch", "tilelang", "triton"]


@dataclass
class Section:
    title: str
    headers: list[str]
    rows: list[list]
    note: str = ""
    extra: list[str] = field(default_factory=list)
    optional: bool = False  # left out of report.md when it has no rows (a run that did not ask for it)


def _present(value) -> bool:
    """A stored number that is really there (the loader stores missing numbers as NaN)."""
    return value == value


def _fmt(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.{digits}g}" if isinstance(value, float) else str(value)


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


def coverage(df) -> Section:
    devices = sorted(df.device.unique())
    rows = []
    for (kernel, backend, variant), group in df.groupby(["kernel", "backend", "variant"], sort=True):
        cells = []
        for device in devices:
            sub = group[group.device == device]
            cells.append(coverage_cell(sub) if len(sub) else "")
        rows.append([kernel, backend_label(backend, variant)] + cells)
    note = ("one entry per kernel x backend x device over all its workloads and dtypes; `no_host`: no host of this "
            "run has the device; `compiles` / `lowers`: no host has it, but a binary / device source for it was "
            "built on another host (never run, so not `ok`); `unsupported` with no `ok` on a device means that "
            "device needs another implementation")
    return Section("Coverage", ["kernel", "backend"] + devices, rows, note)


def correctness(df) -> Section:
    ran = df[df.rel_err.notna() | (df.status == status.MISMATCH)]
    rows = []
    for (device, kernel, backend, variant, dtype), g in ran.groupby(["device", "kernel", "backend", "variant",
                                                                     "dtype"]):
        worst = g.rel_err.max()
        rows.append([device, kernel, backend_label(backend, variant), dtype, _fmt(worst), _fmt(g.tolerance.iloc[0]),
                     int(g.trials.min()), coverage_cell(g)])
    return Section("Correctness", ["device", "kernel", "backend", "dtype", "worst rel_err", "tolerance",
                                   "trials", "status"], rows,
                   "relative error ||out - ref|| / ||ref|| against an fp64 reference, worst over trials with fresh "
                   "seeded inputs; outputs poisoned with NaN before every run")


def performance(df) -> list[Section]:
    """One table per kernel: its workloads x dtypes as rows, the backends that ran it as columns."""
    timed = df[(df.status == status.OK) & df.median_ms.notna()].copy()
    timed["label"] = [backend_label(b, v) for b, v in zip(timed.backend, timed.variant)]
    out = []
    for kernel, k in timed.groupby("kernel"):
        labels = sorted(k.label.unique())
        rows = []
        for (device, workload, dtype), g in k.groupby(["device", "workload", "dtype"]):
            row = [device, workload, dtype]
            for label in labels:
                hit = g[g.label == label]
                if hit.empty:
                    row.append("")
                    continue
                r = hit.iloc[0]
                speed = f" ({r.speedup_vs_framework:.2f}x)" if _present(r.speedup_vs_framework) else ""
                graph = f"; graph {r.graph_median_ms:.3g}" if _present(r.graph_median_ms) else ""
                row.append(f"{r.median_ms:.4g} ms{speed}{graph}")
            best = g.loc[g.median_ms.idxmin()]
            roof = f", {best['roofline_pct']:.0f}% of roofline" if _present(best["roofline_pct"]) else ""
            rate = (f"{best['gbps']:.0f} GB/s" if best["flops"] < best["min_bytes"] * 8 else
                    f"{best['tflops']:.1f} TFLOP/s") if _present(best["tflops"]) else ""
            row.append(f"{best['label']}: {rate}{roof}" if rate else best["label"])
            rows.append(row)
        timers = f"timers: {', '.join(sorted(k.timer.unique()))}"
        out.append(Section(f"Performance: {kernel}", ["device", "workload", "dtype"] + labels + ["fastest"], rows,
                           PERFORMANCE_NOTE, [timers]))
    return out or [Section("Performance", [], [], PERFORMANCE_NOTE)]


PERFORMANCE_NOTE = ("median over repetitions (speed-up against the framework baseline, same cell); `graph`: the same "
                    "call replayed from a CUDA graph, for rows shorter than [run] cuda_graph_below_ms (no launch "
                    "overhead, L2 not flushed); fastest: GB/s for memory-bound kernels (under 8 FLOP per byte), "
                    "TFLOP/s otherwise, and its share of the roofline bound from the measured ceilings")


def measurement(df) -> Section:
    """How far the numbers can be trusted: ceilings, stability of a second timing, clock drops."""
    timed = df[(df.status == status.OK) & df.median_ms.notna()]
    rows = []
    for device, g in timed.groupby("device"):
        peaks = ", ".join(f"{d} {v:.4g}" for d, v in g.groupby("dtype").ceiling_tflops.first().items()
                          if _present(v))
        known = g.clock_dropped.dropna()
        dropped = f"{int(known.astype(bool).sum())}/{len(known)}" if len(known) else "no telemetry"
        stability = g.stability_pct
        worst = g.loc[stability.idxmax()] if stability.notna().any() else None
        rows.append([device, peaks, _fmt(g.ceiling_gbps.iloc[0], 4), _fmt(stability.median(), 2),
                     f"{worst['stability_pct']:.2g}% ({backend_label(worst['backend'], worst['variant'])} "
                     f"{worst['workload']} {worst['dtype']})" if worst is not None else "", dropped])
    unstable = timed[(timed.stability_pct > 2) | timed.clock_dropped.fillna(False).astype(bool)]
    extra = [f"{r.device} {r.kernel} {r.workload} {r.dtype} {backend_label(r.backend, r.variant)}: second timing "
             f"{r.stability_pct:.1f}% off" + (f", clock {r.sm_mhz_start:.0f} -> {r.sm_mhz_end:.0f} MHz "
                                              f"[{r.clock_events}]" if r.clock_dropped else "")
             for r in unstable.itertuples()]
    return Section("Measurement quality", ["device", "matmul ceiling TFLOP/s", "copy ceiling GB/s",
                                           "median stability %", "worst stability", "clock dropped"], rows,
                   "ceilings measured in each cell (large matmul per dtype, large device-to-device copy); every "
                   "build timed twice in the same job (goal: within 2%); clock dropped: SM clock fell >5% during "
                   "timing or the driver reported a power/thermal cap (NVML)", extra)


def crosscheck(df) -> Section:
    """Event medians against the device time CUPTI recorded for the same call's kernels."""
    checked = df[df.cupti_ms.notna()]
    rows = [[r.device, r.kernel, r.workload, r.dtype, backend_label(r.backend, r.variant), _fmt(r.median_ms, 4),
             _fmt(r.crosscheck_events_ms, 4) or "(separate loop)", _fmt(r.cupti_ms, 4), f"{r.cupti_diff_pct:+.1f}"]
            for r in checked.itertuples()]
    long = checked[checked.cupti_ms >= CROSSCHECK_MIN_MS]
    within = long[long.cupti_diff_pct.abs() <= CROSSCHECK_GOAL_PCT]
    extra = [f"{len(within)}/{len(long)} calls of >= {CROSSCHECK_MIN_MS * 1e3:.0f} µs within "
             f"{CROSSCHECK_GOAL_PCT:.0f}% of CUPTI"] if len(long) else []
    extra += [f"outside: {r.kernel} {r.workload} {r.dtype} {backend_label(r.backend, r.variant)} "
              f"{r.cupti_diff_pct:+.1f}%" for r in long.drop(within.index).itertuples()]
    return Section("Cross-check against CUPTI", ["device", "kernel", "workload", "dtype", "backend",
                                                 "median ms (timing)", "events mean ms", "CUPTI kernels mean ms",
                                                 "events vs CUPTI %"], rows,
                   "[run] crosscheck: after the timing, one more loop of calls (L2 flushed before each) timed by "
                   "device events while torch.profiler records CUPTI's kernel times of the same executions. CUPTI "
                   "sums kernel time only; events also count the launch and the gaps between the kernels of a "
                   "multi-kernel call (eager matmul then relu). `(separate loop)`: a row from before the "
                   "same-loop method, compared with the timing median of an earlier loop, so the GPU's power state "
                   "differs between the two", extra, True)


def autotuning(df) -> Section:
    """Tuned variants: what the autotuner chose, how long it took, and whether a second tuning agreed."""
    rows = []
    for r in df[df.config.str.contains('"tuning"', regex=False, na=False)].itertuples():
        record = json.loads(r.config)
        tuning = record["tuning"]
        chosen = ", ".join(f"{k}={v}" for k, v in record["tuned"].items())
        again = "same" if tuning["stable"] else ", ".join(f"{k}={v}" for k, v in tuning["second_choice"].items())
        rows.append([r.device, r.kernel, r.workload, r.dtype, backend_label(r.backend, r.variant), tuning["space"],
                     " / ".join(f"{t:g}" for t in tuning["seconds"]), chosen,
                     " / ".join(f"{t:.4g}" for t in tuning["best_ms"]), again])
    return Section("Autotuning", ["device", "kernel", "workload", "dtype", "backend", "configs", "tuning s (1st / 2nd)",
                                  "chosen", "best ms (1st / 2nd)", "second tuning chose"], rows,
                   "TileLang's autotuner, run twice per job from scratch (opmatrix.tune); the first choice is the "
                   "one measured above; tuning time is part of the compile time", optional=True)


def compile_times(df) -> Section:
    built = df[df.compile_s.notna()]
    rows = []
    for (device, kernel, backend, variant), g in built.groupby(["device", "kernel", "backend", "variant"]):
        caches = ", ".join(f"{c} {n}/{len(g)}" if len(set(g.compile_cache)) > 1 else c
                           for c, n in g.compile_cache.value_counts().items())
        rows.append([device, kernel, backend_label(backend, variant), _fmt(g.compile_s.median()),
                     _fmt(g.compile_s.max()), caches])
    return Section("Compile time (s, first call included)", ["device", "kernel", "backend", "median", "max",
                                                              "cache"], rows)


def failures(df) -> Section:
    bad = df[~df.status.isin([status.OK, status.NO_HOST])]
    rows = [[r.device, r.kernel, r.workload, r.dtype, backend_label(r.backend, r.variant), r.status,
             (r.error or "").splitlines()[0][:160] if r.error else ""] for r in bad.itertuples()]
    hosts = df[df.status == status.NO_HOST].drop_duplicates("device")
    extra = [f"`{r.device}`: no host ({r.error})" for r in hosts.itertuples()]
    return Section("Not run, unsupported or failed", ["device", "kernel", "workload", "dtype", "backend", "status",
                                                      "reason"], rows, extra=extra)


def sections(df) -> list[Section]:
    return [environments(df), coverage(df), correctness(df), *performance(df), measurement(df), crosscheck(df),
            autotuning(df), compile_times(df), failures(df)]


def markdown(df, manifest: dict) -> str:
    from tabulate import tabulate

    lines = [f"# opmatrix run `{manifest.get('run_id', '')}`", "",
             f"matrix `{manifest.get('matrix', '')}` · started {manifest.get('started_at', '')} · "
             f"finished {manifest.get('finished_at', '')} · {len(df)} results "
             f"({', '.join(f'{s} {n}' for s, n in df.status.value_counts().items())})"]
    left = manifest.get("planned_jobs", len(df)) - len(df)
    if left > 0:
        lines += ["", f"**{left} of {manifest['planned_jobs']} planned jobs have no result yet** (the run stopped at "
                      "its deadline; `opmatrix run ... --resume` continues it)"]
    if len(manifest.get("sessions", [])) > 1:
        lines += ["", f"run in {len(manifest['sessions'])} sessions (--resume): " + "; ".join(
            f"{s['started_at']} {s['jobs']} jobs" for s in manifest["sessions"])]
    lines += [""]
    for sec in sections(df):
        if sec.optional and not sec.rows:
            continue
        lines += [f"## {sec.title}", ""]
        if sec.note:
            lines += [sec.note, ""]
        if sec.rows:
            lines += [tabulate(sec.rows, headers=sec.headers, tablefmt="github"), ""]
        else:
            lines += ["(none)", ""]
        lines += [f"- {e}" for e in sec.extra] + ([""] if sec.extra else [])
    return "\n".join(lines)


def write_markdown(df, manifest: dict, path: Path) -> Path:
    path.write_text(markdown(df, manifest), encoding="utf-8")
    return path


def print_terminal(df, console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    for sec in sections(df):
        if sec.title == "Compile time (s, first call included)" or not sec.rows:
            continue
        table = Table(title=sec.title, caption=sec.note or None, caption_justify="left")
        for header in sec.headers:
            table.add_column(str(header), overflow="fold")
        for row in sec.rows:
            table.add_row(*[_style(str(v)) for v in row])
        console.print(table)
        for e in sec.extra:
            console.print(e)


def _style(text: str) -> str:
    if text == status.OK or text.startswith("ok "):
        return f"[green]{text}[/]"
    if text in status.FAILED or any(text.startswith(s) for s in status.FAILED):
        return f"[red]{text}[/]"
    if text in status.NOT_COVERED:
        return f"[yellow]{text}[/]"
    if text in status.BUILD_ONLY:
        return f"[cyan]{text}[/]"
    return text
