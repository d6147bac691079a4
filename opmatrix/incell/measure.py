"""The one timing path. Every backend is timed here, the same way, so speed-ups compare like with like.

GPU (CUDA and ROCm builds of torch): `triton.testing.do_bench`, the one GPU timer. It times each repetition with
a pair of device events allocated up front, zeroes a 256 MB buffer between repetitions outside the timed pair (so
every repetition starts with a cold L2, as a kernel inside a real model would), sizes the repetition count from a
time budget, and returns every sample (`return_mode="all"`). A GPU cell without Triton cannot time: the timing
phase fails saying so, rather than falling back to a second timer of our own that would need its own checking.

`time_callable(call, device, warmup_ms, rep_ms)` takes a zero-argument call prepared elsewhere (the worker's
`phases.prepare_timing`), so the same prepared call can be timed again later, in bursts, by whoever asks.

CPU: wall-clock (`time.perf_counter`) around each call. A process-CPU timer would add up the time of every
thread of a multi-threaded kernel, which is not the latency the caller sees.

Two more views of a GPU row, each from a kept library's timer:
- `graph_replay`: for launches too short for per-call events (below ~20 µs the CPU launch cost shows in the gap
  between the events), `triton.testing.do_bench_cudagraph` captures many calls in one CUDA graph and replays it:
  per-call device time without launch overhead. It does not flush L2 between calls (small working sets stay
  resident, as they do inside a captured model step), so it is reported beside the event median, never instead.
- `crosscheck_cupti`: the cross-check against the GPU's own kernel records: torch.profiler over CUPTI activity
  (the method of TileLang's profiler backend "cupti", without importing TileLang into every job) sums the device
  time of every kernel a call launches, on the same executions the events time. Events measure from the first
  launch to the last kernel's end, so the two agree for one-kernel calls and differ by the launch gaps in
  multi-kernel calls.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

MIN_REPS = 5
MAX_REPS = 10_000
FLUSH_BYTES = 256 * 1024 * 1024  # larger than any L2 so far (H200: 50 MB, MI300X: 256 MB Infinity Cache)
FLUSH_RANGE = "opmatrix-l2-flush"


@dataclass
class Timing:
    samples_ms: list[float]
    timer: str

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def p10_ms(self) -> float:
        return self._deciles()[0]

    @property
    def p90_ms(self) -> float:
        return self._deciles()[-1]

    def _deciles(self) -> list[float]:
        """The 9 cut points between tenths of the samples, interpolated between samples (a single sample is
        every decile)."""
        if len(self.samples_ms) < 2:
            return list(self.samples_ms) * 9
        return statistics.quantiles(self.samples_ms, n=10, method="inclusive")


class TimerMissing(RuntimeError):
    """A GPU cell without triton.testing.do_bench, the one GPU timer."""


def time_callable(call: Callable[[], object], torch_device: str, warmup_ms: float, rep_ms: float) -> Timing:
    """Every sample of `call()` over a budget of `rep_ms` after `warmup_ms` of warm-up: the one timing function."""
    if torch_device == "cpu":
        return _wallclock(call, warmup_ms, rep_ms)
    try:
        from triton.testing import do_bench
    except ImportError as exc:
        raise TimerMissing(f"timing on {torch_device} needs triton.testing.do_bench (L2 flushed between "
                           f"repetitions, budgeted repetitions) and triton is not importable here ({exc}); add "
                           "triton to this toolchain's packages") from None
    samples = do_bench(call, warmup=warmup_ms, rep=rep_ms, return_mode="all")
    return Timing([float(s) for s in samples], "cuda-events (triton.testing.do_bench, L2 flushed)")


def graph_replay(fn: Callable[[], object], rep_ms: float) -> Timing:
    """Per-call time of `fn` replayed from a CUDA graph (no launch overhead, L2 warm). Raises if `fn` cannot be
    captured (host synchronisation, CPU-side control flow on device values)."""
    from triton.testing import do_bench_cudagraph

    samples = do_bench_cudagraph(fn, rep=rep_ms, return_mode="all")
    return Timing([float(s) for s in samples], "cuda-graph replay (triton.testing.do_bench_cudagraph)")


def crosscheck_cupti(fn: Callable[[], object], calls: int) -> tuple[float, float]:
    """(mean event-timed ms, mean CUPTI kernel ms) per call over the same `calls` executions: each call timed by
    a pair of device events while torch.profiler collects CUPTI's records of the kernels it launched (the method
    of TileLang's profiler backend "cupti"). L2 flushed before each call inside an annotated range whose device
    time is taken out again. Timing the same executions both ways isolates the timer: two separate loops differ
    by the GPU's power state (a profiled loop leaves the GPU idle between calls, so it throttles less)."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for start, end in zip(starts, ends):
            with record_function(FLUSH_RANGE):
                flush.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
    events_ms = statistics.fmean(s.elapsed_time(e) for s, e in zip(starts, ends))
    kernels_us = flush_us = 0.0
    for event in prof.events():
        if event.device_type != DeviceType.CUDA:
            continue
        if not event.is_user_annotation:
            kernels_us += event.self_device_time_total
        elif event.name == FLUSH_RANGE:
            flush_us += event.self_device_time_total
    if kernels_us <= flush_us:
        raise RuntimeError("CUPTI recorded no kernel time for the call (profiler without CUDA activity?)")
    return events_ms, (kernels_us - flush_us) / calls / 1e3


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


def release_cached(torch_device: str) -> None:
    """Give the device memory the caching allocator keeps (the fp64 reference, earlier trials' inputs) back, so a
    timing server holds only what its call uses and more contestants fit on the device beside each other."""
    if torch_device != "cpu":
        import torch

        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()


def synchronize(torch_device: str) -> None:
    """Wait for queued device work. If nothing has initialised the device, nothing can be queued on it."""
    if torch_device != "cpu":
        import torch

        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
