"""The device's measured ceilings, once per cell: a large matrix product per dtype (the arithmetic ceiling) and a
large device-to-device copy (the memory ceiling, bytes read + written). Datasheet rates are leads; these are what
this device, driver and library reach today, timed the same way as every kernel (opmatrix.incell.measure). Each result
is then placed against the roofline (opmatrix.core.metrics).

Measured by opmatrix.incell.cell_probe inside the cell's environment."""
from __future__ import annotations

import time

from opmatrix.incell import measure

# 256 MiB is past any CPU's L3. A CPU's matmul is sized per dtype (cpu_matmul_size): on a CPU without half-precision
# units an fp16 1024^3 product takes seconds, and the timer takes at least measure.MIN_REPS of them.
# Timing budget per measurement: a CPU's rates move little from call to call (5 calls at the least, measure.MIN_REPS),
# a GPU's under a power cap more.
SIZES = {"cpu": {"matmul": 1024, "copy_mib": 256, "warmup_ms": 10, "rep_ms": 50},
         "cuda": {"matmul": 8192, "copy_mib": 2048, "warmup_ms": 25, "rep_ms": 200}}
CPU_MATMUL_MIN, CPU_CALL_S = 256, 0.05


def cpu_matmul_size(rate_flops: float) -> int:
    """The CPU matmul size whose one call takes about CPU_CALL_S at `rate_flops` (measured at the smallest size),
    a multiple of 64 between CPU_MATMUL_MIN and SIZES' 1024."""
    n = int((rate_flops * CPU_CALL_S / 2) ** (1 / 3)) // 64 * 64
    return max(CPU_MATMUL_MIN, min(SIZES["cpu"]["matmul"], n))


def measure_ceilings(torch_device: str, dtypes: list[str], warmup_ms: float | None = None,
                     rep_ms: float | None = None) -> dict:
    import torch

    size = SIZES["cpu" if torch_device == "cpu" else "cuda"]
    warmup_ms = size["warmup_ms"] if warmup_ms is None else warmup_ms
    rep_ms = size["rep_ms"] if rep_ms is None else rep_ms
    tflops, sizes = {}, {}
    for dtype in dtypes:
        dt = getattr(torch, dtype)
        n = size["matmul"] if torch_device != "cpu" else cpu_matmul_size(_one_call_rate(dt))
        a = torch.randn(n, n, device=torch_device).to(dt)
        b = torch.randn(n, n, device=torch_device).to(dt)
        c = torch.empty(n, n, device=torch_device, dtype=dt)
        timing = measure.time_callable(lambda: torch.matmul(a, b, out=c), torch_device, warmup_ms, rep_ms)
        tflops[dtype] = 2.0 * n ** 3 / (timing.median_ms / 1e3) / 1e12
        sizes[dtype] = n
        del a, b, c
    matmuls = ", ".join(f"{d} {n}^3" for d, n in sizes.items()) or "none"
    count = size["copy_mib"] * 1024 * 1024 // 4
    src = torch.ones(count, device=torch_device)  # the values do not matter to a copy; randn costs a CPU cell 0.4 s
    dst = torch.empty_like(src)
    timing = measure.time_callable(lambda: dst.copy_(src), torch_device, warmup_ms, rep_ms)
    return {"tflops": tflops, "copy_gbps": 2.0 * src.numel() * 4 / (timing.median_ms / 1e3) / 1e9,
            "how": f"matmul {matmuls}, copy {size['copy_mib']} MiB (read+write), {timing.timer}"}


def _one_call_rate(dt) -> float:
    """FLOP/s of one CPU matmul at the smallest size, after one call to warm it."""
    import torch

    n = CPU_MATMUL_MIN
    a, b = torch.randn(n, n).to(dt), torch.randn(n, n).to(dt)
    torch.matmul(a, b)
    start = time.perf_counter()
    torch.matmul(a, b)
    return 2.0 * n ** 3 / max(time.perf_counter() - start, 1e-9)
