"""Performance tables: one per kernel, workloads x dtypes as rows, the backends that ran it as columns.

Rows are per (device, toolchain): the speed-up is against the baseline of the same cell, and two toolchains on
one device are the comparison a reader came for, so neither may hide the other. The `fastest` column states a
rate and its share of the roofline only where that means something: a call whose roofline bound is a few
microseconds is launch-bound, and "0.0 TFLOP/s, 0% of roofline" would only say so badly.
"""
from __future__ import annotations

from opmatrix.core import status
from opmatrix.core.result import backend_labels
from opmatrix.decide import stats
from opmatrix.report.table import Section, key_cells, mixes_toolchains, present, with_toolchain

LAUNCH_BOUND_S = 5e-6  # below this roofline bound the time is launch and fixed cost, not throughput
CLOCK_MARK = "†"
KEYS = ["device", "workload", "dtype"]

PERFORMANCE_NOTE = ("median over repetitions (speed-up against the framework baseline, same cell); `graph`: the same "
                    "call replayed from a CUDA graph, for rows shorter than [run] cuda_graph_below_ms (no launch "
                    "overhead, L2 not flushed); fastest: GB/s for memory-bound kernels (under 8 FLOP per byte), "
                    "TFLOP/s otherwise, and its share of the roofline bound from the measured ceilings")
LAUNCH_NOTE = (f"; `launch-bound`: the roofline bound of the call (FLOPs at the matmul ceiling, bytes at the copy "
               f"ceiling) is under {LAUNCH_BOUND_S * 1e6:.0f} µs, so its time is launch and fixed cost, not a rate")
PAIRED_NOTE = ("; paired rows (timed in shuffled rounds with the baseline): the speed-up is the median per-round ratio "
               "with its 95% interval (the median's order-statistic bounds over the rounds, widened by the "
               "variation between processes that the run's A/A twins show), `~` where the interval includes 1.0; "
               "the baseline shows its A/A twin's ratio, the noise floor of those rounds")
BUILDS_NOTE = ("; `N builds`: the contestant was built N times ([run] builds), each build timed in the same rounds: "
               "the speed-up is the geometric mean of the builds' medians, its interval the wider of a Student-t "
               "interval over the builds (log scale) and the interval over their pooled rounds")
CLOCK_NOTE = (f"; {CLOCK_MARK}: the SM clock dropped or the driver capped power or temperature during this timing "
              "(see Measurement quality)")


# What a table entry reads of a row (timing, paired, fastest and the roofline bound)
ENTRY_COLUMNS = [*KEYS, "toolchain", "label", "cell", "median_ms", "graph_median_ms", "clock_dropped",
                 "speedup_vs_framework", "speedup", "speedup_lo", "speedup_hi", "aa", "aa_lo", "aa_hi", "round_ms",
                 "build_round_ms", "baseline_round_ms", "tflops", "gbps", "flops", "min_bytes", "roofline_pct",
                 "ceiling_tflops", "ceiling_gbps"]


def timed_rows(df):
    """The rows the performance tables and charts show: `ok` with a median time, each with its backend label."""
    timed = df[(df.status == status.OK) & df.median_ms.notna()].copy()
    timed["label"] = backend_labels(timed)
    return timed


def speedup_point(r) -> tuple[float, float, float]:
    """(speed-up, lo, hi) of one timed row against the framework baseline, as its table entry states it: the
    paired median ratio with its 95% interval where the row was timed in rounds, else the ratio of medians with
    no interval (lo, hi NaN)."""
    nan = float("nan")
    if present(getattr(r, "speedup", nan)):
        return float(r.speedup), float(r.speedup_lo), float(r.speedup_hi)
    return (float(r.speedup_vs_framework) if present(r.speedup_vs_framework) else nan), nan, nan


def performance(df) -> list[Section]:
    timed = timed_rows(df)
    out = [kernel_table(kernel, k) for kernel, k in timed.groupby("kernel")]
    return out or [Section("Performance", [], [], PERFORMANCE_NOTE)]


def kernel_table(kernel: str, k) -> Section:
    labels = sorted(k.label.unique())
    split = mixes_toolchains(k, KEYS)
    capped = power_capped_cells(k)
    entries: dict[tuple, dict] = {}  # (device, workload, dtype, toolchain) -> label -> its row (the first)
    best: dict[tuple, tuple] = {}  # the same key -> its fastest row (the first of equal medians)
    for r in k[[c for c in ENTRY_COLUMNS if c in k.columns]].itertuples(index=False):  # one pass, not a filter of
        # the frame per entry; only the columns an entry reads (a row has ~90, lists among them)
        key = (r.device, r.workload, r.dtype, r.toolchain)
        entries.setdefault(key, {}).setdefault(r.label, r)
        if key not in best or r.median_ms < best[key].median_ms:
            best[key] = r
    rows = []
    for key in sorted(entries):  # groupby's order
        device, workload, dtype, toolchain = key
        row = key_cells([device, workload, dtype], toolchain, split)
        row += [timing(entries[key].get(label)) for label in labels]
        row.append(fastest(best[key], capped))
        rows.append(row)
    text = [str(v) for row in rows for v in row]
    note = (PERFORMANCE_NOTE + (LAUNCH_NOTE if any(v.endswith(": launch-bound") for v in text) else "")
            + (CLOCK_NOTE if any(CLOCK_MARK in v for v in text) else "")
            + (PAIRED_NOTE if (k.pairing != "").any() else "")
            + (BUILDS_NOTE if any(" builds)" in v for v in text) else ""))
    headers = with_toolchain(list(KEYS), "dtype", split) + labels + ["fastest"]
    timers = f"timers: {', '.join(sorted(k.timer.unique()))}"
    return Section(f"Performance: {kernel}", headers, rows, note, [timers, *filter(None, [rounds_left(k)])])


def rounds_left(k) -> str | None:
    """Where contestants left the extra rounds once their interval cleared the threshold: how many, and after how
    many rounds, against the baseline's (every round of its group). Their intervals come from their own rounds."""
    # rows stored before round groups were cannot say which rounds they shared
    paired = k.loc[(k.pairing == "interleaved") & k.round_group.fillna("").ne(""),
                   ["round_group", "rounds", "baseline_round_ms"]]
    base, rivals = {}, []  # the baseline's rounds by round group (a resumed contestant's partner has no row)
    for r in paired.itertuples():
        if not len(r.baseline_round_ms):  # the baseline: in every round of its group(s)
            base[r.round_group] = r.rounds
        else:
            rivals.append(r)
    left = [r.rounds for r in rivals if r.round_group in base and r.rounds < base[r.round_group]]
    if not left:
        return None
    return (f"{len(left)} of {len(rivals)} contestants left the extra rounds once their interval cleared the "
            f"threshold, after {_span(left)} rounds (the baseline and its A/A twin: {_span(base.values())} rounds); "
            "their intervals are from their own rounds")


def _span(values) -> str:
    low, high = int(min(values)), int(max(values))
    return f"{low}" if low == high else f"{low}–{high}"


def timing(r) -> str:
    """One backend's entry (its row, or None where it has none): median, speed-up, CUDA-graph time, and the clock
    mark when the clock dropped."""
    if r is None:
        return ""
    speed = paired(r) or (f" ({stats.ratio_text(r.speedup_vs_framework)}x)" if present(r.speedup_vs_framework)
                           else "")
    graph = f"; graph {r.graph_median_ms:.3g}" if present(r.graph_median_ms) else ""
    mark = f" {CLOCK_MARK}" if clock_dropped(r.clock_dropped) else ""
    return f"{r.median_ms:.4g} ms{speed}{graph}{mark}"


def paired(r) -> str:
    """The paired speed-up with its interval, `~` when the interval includes 1.0 (no difference shown); for the
    baseline itself, its A/A noise: the ratio of its independent twin in the same rounds."""
    if present(getattr(r, "speedup", float("nan"))):
        same = " ~" if r.speedup_lo <= 1.0 <= r.speedup_hi else ""
        builds = len(stats.build_series(r.round_ms, getattr(r, "build_round_ms", [])))
        several = f", {builds} builds" if builds > 1 else ""
        return f" ({stats.interval_text(r.speedup, r.speedup_lo, r.speedup_hi)}{same}{several})"
    if present(getattr(r, "aa", float("nan"))) and not len(r.baseline_round_ms):
        return f" (A/A {r.aa:.3f}x [{r.aa_lo:.3f}, {r.aa_hi:.3f}])"
    return ""


def clock_dropped(value) -> bool:
    """True only for a recorded drop: no telemetry (None/NaN) is not a drop."""
    return present(value) and bool(value)


def roofline_bound_s(r) -> float | None:
    """The least time the call could take at the measured ceilings (compute or memory), or None without them."""
    r = r._asdict() if hasattr(r, "_asdict") else r  # a row as a tuple (itertuples), a Series or a dict
    terms = []
    if present(r["flops"]) and present(r["ceiling_tflops"]) and r["ceiling_tflops"] > 0:
        terms.append(r["flops"] / (r["ceiling_tflops"] * 1e12))
    if present(r["min_bytes"]) and present(r["ceiling_gbps"]) and r["ceiling_gbps"] > 0:
        terms.append(r["min_bytes"] / (r["ceiling_gbps"] * 1e9))
    return max(terms) if terms else None


def launch_bound(r) -> bool:
    """The call's roofline bound is under LAUNCH_BOUND_S: its time is launch and host-side cost, not a rate."""
    bound = roofline_bound_s(r)
    return bound is not None and bound < LAUNCH_BOUND_S


def power_capped_cells(k) -> set[str]:
    """Cells in which the driver reported a power cap: their ceilings were measured under it too."""
    return set(k[k.clock_events.fillna("").str.contains("PowerCap", regex=False)].cell)


def fastest(best, capped: set[str]) -> str:
    label = best.label
    if launch_bound(best):
        return f"{label}: launch-bound"
    if not present(best.tflops):
        return label
    rate = f"{best.gbps:.0f} GB/s" if best.flops < best.min_bytes * 8 else f"{best.tflops:.1f} TFLOP/s"
    return f"{label}: {rate}{roofline(best.roofline_pct, best.cell in capped)}"


def roofline(pct, capped: bool) -> str:
    """", N% of roofline", saying why when N is above 100 (the ceiling is a measurement, not a datasheet peak)."""
    if not present(pct):
        return ""
    if round(pct) <= 100:
        return f", {pct:.0f}% of roofline"
    why = "ceiling measured under the power cap" if capped else "above the ceiling measured in this cell"
    return f", {pct:.0f}% of roofline ({why})"
