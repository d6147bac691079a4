"""Derived metrics of a result row, computed in one place from what was measured: TFLOP/s and GB/s from the median,
the second timing's distance from the first (stability), and the share of the roofline bound from the cell's
measured ceilings. The worker measures; the cell runner calls `derive` once per row. Stdlib only."""
from __future__ import annotations

import dataclasses

from opmatrix.core.result import Result


def roofline_bound_s(flops: float | None, min_bytes: float | None, dtype: str, ceilings: dict) -> float | None:
    """The fastest any implementation could be: max(flops / peak, bytes / bandwidth), in seconds."""
    peak = ceilings.get("tflops", {}).get(dtype)
    bandwidth = ceilings.get("copy_gbps")
    if not (flops and min_bytes and peak and bandwidth):
        return None
    return max(flops / (peak * 1e12), min_bytes / (bandwidth * 1e9))


def roofline_pct(flops: float | None, min_bytes: float | None, median_ms: float | None, dtype: str,
                 ceilings: dict) -> float | None:
    bound = roofline_bound_s(flops, min_bytes, dtype, ceilings)
    if bound is None or not median_ms:
        return None
    return 100.0 * bound / (median_ms / 1e3)


def derive(result: Result, ceilings: dict) -> Result:
    """The row with its rates, stability and roofline share filled in from its own measurements."""
    seconds = (result.median_ms or 0.0) / 1e3
    stability = (100.0 * abs(result.rerun_median_ms - result.median_ms) / result.median_ms
                 if result.median_ms and result.rerun_median_ms is not None else None)
    return dataclasses.replace(
        result,
        tflops=result.flops / seconds / 1e12 if seconds > 0 and result.flops is not None else None,
        gbps=result.min_bytes / seconds / 1e9 if seconds > 0 and result.min_bytes is not None else None,
        stability_pct=stability,
        ceiling_tflops=ceilings.get("tflops", {}).get(result.dtype),
        ceiling_gbps=ceilings.get("copy_gbps"),
        roofline_pct=roofline_pct(result.flops, result.min_bytes, result.median_ms, result.dtype, ceilings))
