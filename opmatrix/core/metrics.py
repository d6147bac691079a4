"""Derived metrics of a result row, computed in one place from what was measured: TFLOP/s and GB/s from the median,
the second timing's distance from the first (stability), the share of the roofline bound from the cell's
measured ceilings, and the physics guard. The worker measures; the cell runner calls `derive` once per row.

The physics guard: a row that reports a rate beyond its roofline bound by more than GUARD_MARGIN did not do its
work while it was timed (or its timer was fooled): it is `suspect`, never eligible for a verdict, and its error
names the rate and the bound. On a CPU the bound's bandwidth is the copy rate measured at the largest size not above
the row's own bytes (opmatrix.incell.ceilings: cache-resident data is legitimately faster than DRAM), and the
margin is wider: a CPU's clock boost and its neighbours move both measurements by tens of per cent. Stdlib only."""
from __future__ import annotations

import dataclasses

from opmatrix.core import status
from opmatrix.core.result import Result

GUARD_MARGIN = {"gpu": 1.5, "cpu": 2.0}  # suspect above this many times the roofline bound's rate


def rate_gbps(min_bytes: float | None, ms: float | None) -> float | None:
    """The rate of a call that moves `min_bytes` in `ms` milliseconds, in GB/s (a row's `gbps` from its median;
    None without bytes or a positive time)."""
    if min_bytes is None or not ms or ms <= 0:
        return None
    return min_bytes / (ms / 1e3) / 1e9


def copy_gbps(ceilings: dict, moved_bytes: float | None) -> float | None:
    """The copy ceiling that bounds a row moving `moved_bytes`: where copies were measured at several sizes (a
    CPU), the rate of the largest size not above the row's bytes (the smallest size if all are larger), else the
    one large copy's rate."""
    by_bytes = {int(k): v for k, v in (ceilings.get("copy_gbps_by_bytes") or {}).items()}
    if not by_bytes or not moved_bytes:
        return ceilings.get("copy_gbps")
    fitting = [size for size in by_bytes if size <= moved_bytes]
    return by_bytes[max(fitting) if fitting else min(by_bytes)]


def roofline_bound_s(flops: float | None, min_bytes: float | None, dtype: str, ceilings: dict) -> float | None:
    """The fastest any implementation could be: max(flops / peak, bytes / bandwidth), in seconds."""
    peak = ceilings.get("tflops", {}).get(dtype)
    bandwidth = copy_gbps(ceilings, min_bytes)
    if not (flops and min_bytes and peak and bandwidth):
        return None
    return max(flops / (peak * 1e12), min_bytes / (bandwidth * 1e9))


def roofline_pct(flops: float | None, min_bytes: float | None, median_ms: float | None, dtype: str,
                 ceilings: dict) -> float | None:
    bound = roofline_bound_s(flops, min_bytes, dtype, ceilings)
    if bound is None or not median_ms:
        return None
    return 100.0 * bound / (median_ms / 1e3)


def guarded(result: Result) -> Result:
    """`suspect` when an ok row's rate is beyond its roofline bound by more than the margin (see the module)."""
    if result.status != status.OK or result.roofline_pct is None:
        return result
    margin = GUARD_MARGIN["cpu" if result.vendor == "cpu" else "gpu"]
    if result.roofline_pct <= 100.0 * margin:
        return result
    rates = ", ".join(filter(None, [
        f"{result.tflops:.4g} TFLOP/s against a matmul ceiling of {result.ceiling_tflops:.4g}"
        if result.tflops and result.ceiling_tflops else "",
        f"{result.gbps:.4g} GB/s against a copy ceiling of {result.ceiling_gbps:.4g}"
        if result.gbps and result.ceiling_gbps else ""]))
    return dataclasses.replace(result, status=status.SUSPECT, phase="timing", error=(
        f"a rate beyond physics: {result.roofline_pct:.0f} % of the roofline bound ({rates}, both measured in this "
        f"cell), above the guard's {100 * margin:.0f} %: its timed calls cannot have done the work"))


def derive(result: Result, ceilings: dict) -> Result:
    """The row with its rates, stability and roofline share filled in from its own measurements, then guarded."""
    seconds = (result.median_ms or 0.0) / 1e3
    stability = (100.0 * abs(result.rerun_median_ms - result.median_ms) / result.median_ms
                 if result.median_ms and result.rerun_median_ms is not None else None)
    derived = dataclasses.replace(
        result,
        tflops=result.flops / seconds / 1e12 if seconds > 0 and result.flops is not None else None,
        gbps=rate_gbps(result.min_bytes, result.median_ms),
        stability_pct=stability,
        ceiling_tflops=ceilings.get("tflops", {}).get(result.dtype),
        ceiling_gbps=copy_gbps(ceilings, result.min_bytes),
        ceilings_kept=ceilings.get("kept_from", ""),
        roofline_pct=roofline_pct(result.flops, result.min_bytes, result.median_ms, result.dtype, ceilings))
    return guarded(derived)
