"""The device's measured ceilings, once per cell: a large matrix product per dtype (the arithmetic ceiling) and a
large device-to-device copy (the memory ceiling, bytes read + written). Datasheet rates are leads; these are what
this device, driver and library reach today, timed the same way as every kernel (opmatrix.incell.measure). Each result
is then placed against the roofline, and a rate beyond it is caught (opmatrix.core.metrics).

On a CPU the ceilings are measured on one thread and multiplied by the threads torch uses: a multi-threaded call
on a busy machine waits at every barrier for its slowest thread (a 2-core machine shared with other work measured
its matmul ceiling 4x under what its kernels then reached), while one thread's best call is the rate of a core
that was not interrupted, and the cores' sum bounds what all of them can do. Each is the best call of its
measurement, not the median: another process only ever slows a call. A CPU's caches also serve small working sets
faster than its DRAM, so the copy is measured at several sizes (COPY_SIZES_CPU, bytes moved) and a row is held
against the rate of the largest measured size that is not larger than its own bytes (opmatrix.core.metrics).

Measured by opmatrix.incell.cell_probe inside the cell's environment."""
from __future__ import annotations

import statistics
import time

from opmatrix.incell import measure

# 256 MiB is past any CPU's L3. A CPU's matmul is sized per dtype (cpu_matmul_size): on a CPU without half-precision
# units an fp16 1024^3 product takes seconds, and the timer takes at least measure.MIN_REPS of them.
# Timing budget per measurement: a CPU's rates move little from call to call (5 calls at the least, measure.MIN_REPS),
# a GPU's under a power cap more.
SIZES = {"cpu": {"matmul": 1024, "copy_mib": 256, "warmup_ms": 10, "rep_ms": 100},
         "cuda": {"matmul": 8192, "copy_mib": 2048, "warmup_ms": 25, "rep_ms": 200}}
CPU_MATMUL_MIN, CPU_CALL_S = 128, 0.002
COPY_SIZES_CPU = (256 * 1024, 2 * 2 ** 20, 16 * 2 ** 20, 128 * 2 ** 20)  # bytes moved (read + written) per copy


def cpu_matmul_size(rate_flops: float) -> int:
    """The CPU matmul size whose one call takes about CPU_CALL_S at `rate_flops` (measured at the smallest size),
    a multiple of 64 between CPU_MATMUL_MIN and SIZES' 1024."""
    n = int((rate_flops * CPU_CALL_S / 2) ** (1 / 3)) // 64 * 64
    return max(CPU_MATMUL_MIN, min(SIZES["cpu"]["matmul"], n))


def measure_ceilings(torch_device: str, dtypes: list[str], warmup_ms: float | None = None,
                     rep_ms: float | None = None) -> dict:
    import torch

    if torch_device == "cpu":
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            measured = _measure(torch_device, dtypes, warmup_ms, rep_ms)
        finally:
            torch.set_num_threads(threads)
        return scaled(measured, threads)
    return _measure(torch_device, dtypes, warmup_ms, rep_ms)


def scaled(one_thread: dict, threads: int) -> dict:
    """A CPU's ceilings for `threads` threads from one thread's."""
    return dict(one_thread, tflops={d: v * threads for d, v in one_thread["tflops"].items()},
                copy_gbps=one_thread["copy_gbps"] * threads,
                copy_gbps_by_bytes={k: v * threads for k, v in one_thread["copy_gbps_by_bytes"].items()},
                how=one_thread["how"] + f"; one thread's rates x {threads} threads")


def _measure(torch_device: str, dtypes: list[str], warmup_ms: float | None, rep_ms: float | None) -> dict:
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
        timing = measure.time_repeated(lambda: torch.matmul(a, b, out=c), torch_device, warmup_ms, rep_ms)
        tflops[dtype] = 2.0 * n ** 3 / (_typical_ms(timing, torch_device) / 1e3) / 1e12
        sizes[dtype] = n
        del a, b, c
    matmuls = ", ".join(f"{d} {n}^3" for d, n in sizes.items()) or "none"
    copy_gbps, timer = _copy_gbps(2 * size["copy_mib"] * 2 ** 20, torch_device, warmup_ms, rep_ms)
    measured = {"tflops": tflops, "copy_gbps": copy_gbps,
                "how": f"matmul {matmuls}, copy {size['copy_mib']} MiB (read+write), {timer}"}
    if torch_device == "cpu":
        measured["copy_gbps_by_bytes"] = {str(moved): _copy_gbps(moved, "cpu", warmup_ms / 2, rep_ms / 2)[0]
                                          for moved in COPY_SIZES_CPU}
        measured["how"] += "; best call of each; copies of " + ", ".join(f"{m / 2 ** 20:g}" for m in COPY_SIZES_CPU) \
            + " MiB moved for working sets that fit a cache"
    return measured


def _typical_ms(timing: measure.Timed, torch_device: str) -> float:
    """A GPU's median call (power states vary from call to call); a CPU's best call (other processes only slow it)."""
    return min(timing.samples_ms) if torch_device == "cpu" else statistics.median(timing.samples_ms)


def _copy_gbps(moved: int, torch_device: str, warmup_ms: float, rep_ms: float) -> tuple[float, str]:
    """(GB/s, timer) of a float32 copy that moves `moved` bytes (half read, half written), its call taken as
    _typical_ms says."""
    import torch

    src = torch.ones(moved // 8, device=torch_device)  # the values do not matter to a copy; randn costs a CPU 0.4 s
    dst = torch.empty_like(src)
    timing = measure.time_repeated(lambda: dst.copy_(src), torch_device, warmup_ms, rep_ms)
    return moved / (_typical_ms(timing, torch_device) / 1e3) / 1e9, timing.timer


def _one_call_rate(dt) -> float:
    """FLOP/s of the best of three CPU matmuls at the smallest size, after one call to warm it."""
    import torch

    n = CPU_MATMUL_MIN
    a, b = torch.randn(n, n).to(dt), torch.randn(n, n).to(dt)
    torch.matmul(a, b)
    best = float("inf")
    for _ in range(3):  # the best of three: a busy machine only slows a call
        start = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - start)
    return 2.0 * n ** 3 / max(best, 1e-9)
