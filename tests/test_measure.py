"""Measurement helpers: the timing loop's contract, roofline placement and the clock-drop rule."""
import time

from opmatrix.incell import measure, telemetry
from opmatrix.core.metrics import roofline_pct


def test_wallclock_timing_returns_every_sample_within_budget():
    timing = measure.time_callable(lambda: time.sleep(0.002), "cpu", warmup_ms=5, rep_ms=40)
    assert measure.MIN_REPS <= len(timing.samples_ms) < 40
    assert all(s >= 2.0 for s in timing.samples_ms)
    assert timing.quantile(0.1) <= timing.median_ms <= timing.quantile(0.9)
    assert timing.timer.startswith("wallclock")


def test_roofline_uses_the_binding_ceiling():
    ceilings = {"tflops": {"float16": 800.0}, "copy_gbps": 4000.0}
    # 2*4096^3 flop in 0.2 ms: arithmetic bound 0.172 ms -> 86%
    assert round(roofline_pct(2 * 4096 ** 3, 100e6, 0.2, "float16", ceilings)) == 86
    # 1 GB moved in 0.5 ms: memory bound 0.25 ms -> 50%
    assert round(roofline_pct(1e6, 1e9, 0.5, "float16", ceilings)) == 50
    assert roofline_pct(1e6, 1e9, 0.5, "bfloat16", ceilings) is None  # no ceiling for that dtype: no claim


def test_clock_drop_flag():
    start = {"sm_mhz": 1980, "power_w": 500.0, "temp_c": 50, "reasons": []}
    steady = {"sm_mhz": 1950, "power_w": 690.0, "temp_c": 60, "reasons": []}
    dropped = {"sm_mhz": 1700, "power_w": 700.0, "temp_c": 70, "reasons": []}
    capped = {"sm_mhz": 1980, "power_w": 700.0, "temp_c": 70, "reasons": ["SwPowerCap"]}
    assert telemetry.summarize(start, steady)["clock_dropped"] is False
    assert telemetry.summarize(start, dropped)["clock_dropped"] is True
    summary = telemetry.summarize(start, capped)
    assert summary["clock_dropped"] is True and summary["clock_events"] == "SwPowerCap"
