"""How far the numbers can be trusted: ceilings and stability per cell, clock drops per device, the CUPTI
cross-check, and what the autotuner chose.

Ceilings are measured once per cell, so they are reported per (device, toolchain) where a device ran under
several toolchains. A clock drop is summarised once per device (how many timed rows, which cap, the SM clock
range); the rows it touched carry a mark in the performance tables instead of one bullet each.
"""
from __future__ import annotations

import json

import numpy as np

from opmatrix.core import status
from opmatrix.decide import stats
from opmatrix.core.result import backend_label
from opmatrix.report.performance import clock_dropped
from opmatrix.report.table import Section, fmt, key_cells, mixes_toolchains, present, with_toolchain
from opmatrix.store import frame_rows

CROSSCHECK_MIN_MS = 0.05  # the agreement goal applies to calls of at least 50 µs
CROSSCHECK_GOAL_PCT = 3.0
STABILITY_GOAL_PCT = 2.0


def measurement(df) -> Section:
    timed = df[(df.status == status.OK) & df.median_ms.notna()]
    split = mixes_toolchains(timed, ["device"])
    rows = [key_cells([device], toolchain, split) + cell_quality(g)
            for (device, toolchain), g in timed.groupby(["device", "toolchain"])]
    extra = [line for device, g in timed.groupby("device") if (line := clock_summary(device, g))]
    extra += kept_ceilings(timed)
    drops = timed.clock_dropped.map(clock_dropped).astype(bool)
    unexplained = timed[(timed.stability_pct > STABILITY_GOAL_PCT) & ~drops]  # no clock drop to blame
    extra += [f"{r.device} {r.kernel} {r.workload} {r.dtype} {backend_label(r.backend, r.variant)}: second timing "
              f"{r.stability_pct:.1f}% off"
              for r in frame_rows(unexplained, ["device", "kernel", "workload", "dtype", "backend", "variant",
                                                "stability_pct"])]
    headers = with_toolchain(["device", "matmul ceiling TFLOP/s", "copy ceiling GB/s", "median stability %",
                              "worst stability", "clock dropped"], "device", split)
    extra += strayed_rounds(timed) + machine_load(timed)
    paired = bool((timed.pairing != "").any())
    stability = (STABILITY_PAIRED if paired else STABILITY_SEQUENTIAL)
    extra += aa_floors(timed) if paired else []
    return Section("Measurement quality", headers, rows,
                   "ceilings measured in each cell (large matmul per dtype, large device-to-device copy); "
                   f"{stability} (goal: within 2%); clock dropped: SM clock fell >5% during timing or the driver "
                   "reported a power/thermal cap (NVML)", extra)


def strayed_rounds(timed) -> list[str]:
    """One line per row whose rounds strayed (opmatrix.core.straying): which, how far, and whether they were left
    out of its interval."""
    if "stray_note" not in timed.columns:
        return []
    hit = timed[timed.stray_note.fillna("") != ""]
    return [f"{r.device} {r.kernel} {r.workload} {r.dtype} {backend_label(r.backend, r.variant)}: {r.stray_note}"
            for r in frame_rows(hit, ["device", "kernel", "workload", "dtype", "backend", "variant", "stray_note"])]


def machine_load(timed) -> list[str]:
    """Per device, the load other processes put on the machine while its rows were timed (the busiest row's
    median round), and the most CPU a contestant's worker used between its bursts."""
    out = []
    for device, g in timed.groupby("device"):
        loads = [float(np.median(v)) for v in g.round_others_cores if v is not None and len(v)]
        idle = g.idle_cpu_s.dropna() if "idle_cpu_s" in g.columns else g.iloc[:0, :0]
        if not loads:
            continue
        text = (f"{device}: other processes kept {np.median(loads):.2g} cores busy in the median round of the median "
                f"row, {max(loads):.2g} in the busiest row's")
        if len(idle):
            text += f"; a contestant's worker used at most {float(idle.max()):.3g} s of CPU between its bursts"
        out.append(text)
    return out


def kept_ceilings(timed) -> list[str]:
    """Where a device's ceilings were not measured in the run's own cells but kept from an earlier cell on the same
    host ([run] ceilings_kept_h): when they were measured."""
    kept = timed[timed.ceilings_kept != ""]
    return [f"{device}: ceilings kept from an earlier cell on the same host, measured at "
            f"{', '.join(sorted(set(g.ceilings_kept)))} ([run] ceilings_kept_h)" for device, g in kept.groupby("device")]


STABILITY_SEQUENTIAL = "every build timed twice in the same job"
STABILITY_PAIRED = "stability: the median of the later half of a row's rounds against its overall median"


AA_NARROW = 0.01  # an A/A floor within ±1 % needs no advice
AA_READS = ["workload", "dtype", "aa", "aa_lo", "aa_hi", "aa_round_ms", "round_ms", "reps", "samples_ms", "median_ms",
            "rounds_s"]  # what aa_floors reads of a row (aa, aa_lo, aa_hi where add_paired_columns added them)


def aa_floors(timed) -> list[str]:
    """The A/A noise floor per kernel and device: the baseline's independent twin against the baseline in the
    same rounds (the widest interval half-width over the kernel's workloads), with what set it: how long the bursts
    were and how far one round strays, and, above ±1 %, what would narrow it."""
    lines = []
    twins = timed[stats.twinned_baselines(timed)]
    for (kernel, device, toolchain), g in twins.groupby(["kernel", "device", "toolchain"]):
        floors = [(interval, r) for r in frame_rows(g, [c for c in AA_READS if c in g.columns])
                  if (interval := _aa_interval(r))]  # per workload
        if floors:
            interval, r = max(floors, key=lambda f: f[0].halfwidth)
            ratios = stats.ratios(r.aa_round_ms, r.round_ms)
            width = interval.halfwidth
            lines.append(f"A/A noise floor, {kernel} on {device}.{toolchain}: ±{100 * width:.2f}% (widest: "
                         f"{r.workload} {r.dtype}, {_rounds_of(r, ratios)}; over {len(floors)} workload(s))"
                         + (f": {_what_narrows(interval)}" if width > AA_NARROW else ""))
    return lines


def _aa_interval(r) -> stats.Interval | None:
    """The A/A interval of a twinned baseline's row: the one its verdicts use (stats.add_paired_columns' aa, aa_lo,
    aa_hi: computed once for every row of the run, vectorised), else, for a frame without those columns, the
    interval of its per-round A/A ratios."""
    if hasattr(r, "aa_lo"):
        return stats.Interval(r.aa, r.aa_lo, r.aa_hi) if present(r.aa_lo) else None
    return stats.median_interval(stats.ratios(r.aa_round_ms, r.round_ms))


def _rounds_of(r, ratios: list[float]) -> str:
    """"20 rounds of ~5-call bursts, 18 ms of calls each, 0.41 s per round, one round strays ±9.1%": what the
    floor was measured with, and what a round costs."""
    rounds = len(r.round_ms)
    text = f"{rounds} rounds"
    calls = (r.reps if present(r.reps) and r.reps else len(r.samples_ms)) / rounds  # reps: every sample, kept or not
    if calls >= 1 and present(r.median_ms):
        text += f" of ~{calls:.0f}-call bursts, {calls * r.median_ms:.3g} ms of calls each"
    if present(getattr(r, "rounds_s", None)) and r.rounds_s > 0:
        text += f", {r.rounds_s / rounds:.2g} s per round"  # what more rounds would cost
    spread = stats.per_round_spread(ratios)
    return text + (f", one round strays ±{100 * spread:.1f}%" if spread is not None else "")


def _what_narrows(interval) -> str:
    """Noise (a wide interval) narrows with rounds; a steady offset between the twin and the baseline does not."""
    offset, half = abs(interval.estimate - 1), (interval.hi - interval.lo) / 2
    if offset > half:
        return (f"the twin sits {100 * offset:.1f}% off the baseline with an interval of ±{100 * half:.1f}%: two "
                "processes of one build differ steadily (host-side, for launch-bound calls); more rounds do not "
                "remove that")
    return ("round-to-round noise: more rounds (`[run] noise_target`) and longer bursts (`[run] burst_calls`) "
            "narrow it")


def cell_quality(g) -> list[str]:
    """One cell's ceilings (measured once per cell), timing stability and clock-drop count."""
    peaks = ", ".join(f"{d} {v:.4g}" for d, v in g.groupby("dtype").ceiling_tflops.first().items() if present(v))
    known = g.clock_dropped.dropna()
    dropped = f"{int(known.astype(bool).sum())}/{len(known)}" if len(known) else "no telemetry"
    stability = g.stability_pct
    worst = ""
    if stability.notna().any():
        w = g.loc[stability.idxmax()]
        worst = (f"{w['stability_pct']:.2g}% ({backend_label(w['backend'], w['variant'])} {w['workload']} "
                 f"{w['dtype']})")
    return [peaks, fmt(g.ceiling_gbps.iloc[0], 4), fmt(stability.median(), 2), worst, dropped]


def clock_summary(device: str, g) -> str:
    """One line per device whose clock dropped: how often, why (NVML's reasons), the SM clock range seen."""
    known = g[g.clock_dropped.notna()]
    drops = known[known.clock_dropped.map(clock_dropped).astype(bool)]
    if drops.empty:
        return ""
    reasons = sorted({r.strip() for events in drops.clock_events.fillna("") for r in events.split(",") if r.strip()})
    clocks = [mhz for mhz in [*known.sm_mhz_start, *known.sm_mhz_end] if present(mhz)]
    span = f", SM {min(clocks):.0f}–{max(clocks):.0f} MHz" if clocks else ""
    unstable = int((drops.stability_pct > STABILITY_GOAL_PCT).sum())
    off = (f"; in {unstable} of them the second timing was more than {STABILITY_GOAL_PCT:.0f}% off" if unstable
           else "")
    why = f" ({', '.join(reasons)})" if reasons else ""
    return f"{device}: clock dropped in {len(drops)}/{len(known)} timed rows{why}{span}{off}"


CROSSCHECK_NOTE = ("[run] crosscheck: after the timing, one more loop of calls (L2 flushed before each) timed by "
                   "device events while torch.profiler records CUPTI's kernel times of the same executions. CUPTI "
                   "sums kernel time only; events also count the launch and the gaps between the kernels of a "
                   "multi-kernel call (eager matmul then relu)")


def crosscheck(df) -> Section:
    """Event means against the device time CUPTI recorded for the same executions of the call."""
    recorded = df[df.cupti_ms.notna()]
    checked = recorded[recorded.crosscheck_events_ms.notna()]
    split = mixes_toolchains(checked, ["device"])
    rows = [key_cells([r.device], r.toolchain, split)
            + [r.kernel, r.workload, r.dtype, backend_label(r.backend, r.variant), fmt(r.median_ms, 4),
               fmt(r.crosscheck_events_ms, 4), fmt(r.cupti_ms, 4), f"{r.cupti_diff_pct:+.1f}"]
            for r in frame_rows(checked)]
    note = CROSSCHECK_NOTE
    left_out = len(recorded) - len(checked)
    if left_out:
        note += (f". {left_out} of {len(recorded)} rows are left out: they come from the older separate-loop "
                 "method (CUPTI against the median of an earlier loop, in another power state of the GPU), so "
                 "their difference measures the GPU's state, not the timer")
    long = checked[checked.cupti_ms >= CROSSCHECK_MIN_MS]
    within = long[long.cupti_diff_pct.abs() <= CROSSCHECK_GOAL_PCT]
    extra = [f"{len(within)}/{len(long)} calls of >= {CROSSCHECK_MIN_MS * 1e3:.0f} µs within "
             f"{CROSSCHECK_GOAL_PCT:.0f}% of CUPTI"] if len(long) else []
    extra += [f"outside: {r.kernel} {r.workload} {r.dtype} {backend_label(r.backend, r.variant)} "
              f"{r.cupti_diff_pct:+.1f}%" for r in frame_rows(long.drop(within.index))]
    headers = with_toolchain(["device", "kernel", "workload", "dtype", "backend", "median ms (timing)",
                              "events mean ms", "CUPTI kernels mean ms", "events vs CUPTI %"], "device", split)
    return Section("Cross-check against CUPTI", headers, rows, note, extra, optional=recorded.empty)


def autotuning(df) -> Section:
    """Tuned variants: what the autotuner chose, how long it took, and whether a second tuning agreed."""
    tuned = df[df.config.str.contains('"tuning"', regex=False, na=False)]
    split = mixes_toolchains(tuned, ["device"])
    rows = []
    for r in frame_rows(tuned):
        record = json.loads(r.config)
        tuning = record["tuning"]
        chosen = ", ".join(f"{k}={v}" for k, v in record["tuned"].items())
        again = "same" if tuning["stable"] else ", ".join(f"{k}={v}" for k, v in tuning["second_choice"].items())
        rows.append(key_cells([r.device], r.toolchain, split)
                    + [r.kernel, r.workload, r.dtype, backend_label(r.backend, r.variant), tuning["space"],
                       " / ".join(f"{t:g}" for t in tuning["seconds"]), chosen,
                       " / ".join(f"{t:.4g}" for t in tuning["best_ms"]), again])
    headers = with_toolchain(["device", "kernel", "workload", "dtype", "backend", "configs", "tuning s (1st / 2nd)",
                              "chosen", "best ms (1st / 2nd)", "second tuning chose"], "device", split)
    return Section("Autotuning", headers, rows,
                   "TileLang's autotuner, run twice per job from scratch (opmatrix.tune); the first choice is the "
                   "one measured above; tuning time is part of the compile time", optional=True)
