"""The one timing path. Every backend is timed here, the same way, so speed-ups compare like with like.

GPU (CUDA and ROCm builds of torch): `triton.testing.do_bench` when Triton is importable. It times each
repetition with a pair of device events allocated up front, zeroes a 256 MB buffer between repetitions outside
the timed pair (so every repetition starts with a cold L2, as a kernel inside a real model would), sizes the
repetition count from a time budget, and returns every sample (`return_mode="all"`). Without Triton the same
method is done here with torch.cuda events.

CPU: wall-clock (`time.perf_counter`) around each call. A process-CPU timer would add up the time of every
thread of a multi-threaded kernel, which is not the latency the caller sees.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

MIN_REPS = 5
MAX_REPS = 10_000


@dataclass
class Timing:
    samples_ms: list[float]
    timer: str

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    def quantile(self, q: float) -> float:
        ordered = sorted(self.samples_ms)
        return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def time_callable(fn: Callable[[], object], torch_device: str, warmup_ms: float, rep_ms: float) -> Timing:
    if torch_device == "cpu":
        return _wallclock(fn, warmup_ms, rep_ms)
    try:
        from triton.testing import do_bench
    except ImportError:
        return _cuda_events(fn, warmup_ms, rep_ms)
    samples = do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="all")
    return Timing([float(s) for s in samples], "cuda-events (triton.testing.do_bench, L2 flushed)")


def _wallclock(fn: Callable[[], object], warmup_ms: float, rep_ms: float) -> Timing:
    fn()
    deadline = time.perf_counter() + warmup_ms / 1e3
    while time.perf_counter() < deadline:
        fn()
    samples: list[float] = []
    budget_end = time.perf_counter() + rep_ms / 1e3
    while len(samples) < MIN_REPS or (time.perf_counter() < budget_end and len(samples) < MAX_REPS):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return Timing(samples, "wallclock (perf_counter)")


def _cuda_events(fn: Callable[[], object], warmup_ms: float, rep_ms: float) -> Timing:
    import torch

    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)
    for _ in range(max(1, int(warmup_ms / estimate))):
        fn()
    n = min(MAX_REPS, max(MIN_REPS, int(rep_ms / estimate)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for s, e in zip(starts, ends):
        flush.zero_()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return Timing([s.elapsed_time(e) for s, e in zip(starts, ends)], "cuda-events (torch, L2 flushed)")


def synchronize(torch_device: str) -> None:
    """Wait for queued device work. If nothing has initialised the device, nothing can be queued on it."""
    if torch_device != "cpu":
        import torch

        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
