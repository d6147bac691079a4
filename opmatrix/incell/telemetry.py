"""GPU telemetry around a measurement: SM clock, power, temperature and the driver's clock-event reasons, read
through NVML (nvidia-ml-py) for NVIDIA GPUs. A result timed while the clock dropped, or while the driver reports
a power or thermal cap, is flagged `clock_dropped`: sustained large kernels throttle, and the report must show it
rather than average it away. No NVML (AMD, CPU, or nvidia-ml-py missing): no telemetry, nothing flagged.

Used as `with telemetry.watch(device) as summary: <time>`: afterwards `summary` holds the Result fields
(sm_mhz_start, sm_mhz_end, power_w, temp_c, clock_events, clock_dropped), or nothing where there is no telemetry.
Telemetry never fails a measurement: a sample that cannot be read leaves the summary empty."""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator

DROP = 0.95  # the SM clock at the end below 95% of the start counts as a drop
# Clock-event reasons that mean "slower than the chip can run", by nvidia-ml-py constant name.
LIMITING = ("SwPowerCap", "HwSlowdown", "HwThermalSlowdown", "SwThermalSlowdown", "HwPowerBrakeSlowdown")
ALL_REASONS = LIMITING + ("ApplicationsClocksSetting", "SyncBoost", "UserDefinedClocks", "DisplayClockSetting")


class GpuTelemetry:
    def __init__(self) -> None:
        import pynvml
        import torch

        self.nvml = pynvml
        pynvml.nvmlInit()
        uuid = str(torch.cuda.get_device_properties(0).uuid)
        self.handle = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else "GPU-" + uuid)

    def sample(self) -> dict:
        nv, h = self.nvml, self.handle
        bits = nv.nvmlDeviceGetCurrentClocksEventReasons(h)
        reasons = [name for name in ALL_REASONS if bits & getattr(nv, f"nvmlClocksEventReason{name}", 0)]
        return {"sm_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                "power_w": nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
                "temp_c": nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU), "reasons": reasons}

    def close(self) -> None:
        self.nvml.nvmlShutdown()


def open_for(device) -> GpuTelemetry | None:
    if device.vendor != "nvidia":
        return None
    try:
        return GpuTelemetry()
    except Exception:  # no NVML library, no driver access, or no nvidia-ml-py: measure without telemetry
        return None


@contextlib.contextmanager
def watch(device, open_gpu: Callable | None = None) -> Iterator[dict]:
    """Sample the GPU before and after the block; yields the dict that then holds the summary (empty without
    NVML, or if a sample failed). `open_gpu(device)` -> a sampler with sample() and close(), or None."""
    gpu = (open_gpu or open_for)(device)
    summary: dict = {}
    if gpu is None:
        yield summary
        return
    try:
        start = _sample(gpu)
        yield summary
        end = _sample(gpu)
        if start is not None and end is not None:
            summary.update(summarize(start, end))
    finally:
        gpu.close()


def _sample(gpu) -> dict | None:
    try:
        return gpu.sample()
    except Exception:  # NVML refused a query (permissions, a GPU that fell off the bus): measure without it
        return None


def summarize(start: dict, end: dict) -> dict:
    limiting = [r for r in end["reasons"] if r in LIMITING]
    return {"sm_mhz_start": start["sm_mhz"], "sm_mhz_end": end["sm_mhz"], "power_w": end["power_w"],
            "temp_c": end["temp_c"], "clock_events": ",".join(end["reasons"]),
            "clock_dropped": bool(end["sm_mhz"] < DROP * start["sm_mhz"] or limiting)}
