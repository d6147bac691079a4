"""The one timing path. Every contestant is timed here, the same way, so speed-ups compare like with like.

`time_calls(fn, calls, device)` times a list of calls, each on buffers of its own (the judge's: every call of a
burst gets input contents it has never seen), one after another, and returns every sample:
- CPU: wall clock (`time.perf_counter`, which is CLOCK_MONOTONIC: the same clock in every process, so the judge
  checks the marks against its own) read right before and right after each call. A process-CPU timer would add
  up the time of every thread of a multi-threaded kernel, which is not the latency the caller sees. Beside each
  call, the time the calling thread spent waiting for a core while other processes had it (the kernel's
  `run_delay`, /proc/thread-self/schedstat): on a busy machine that is not the kernel's time, and the judge takes it
  out once it has checked it against what the kernel says of the whole burst.
- GPU: a pair of device events around each call, allocated up front, after a 256 MB buffer is zeroed outside the
  timed pair (every call starts with a cold L2, as a kernel inside a real model would), one synchronisation at the
  end: triton.testing.do_bench's method, over calls that each get their own buffers.
A call whose implementation allocates its own output (RETURNS_OUTPUT) has it copied into the judge's output buffer
right after its end mark, outside the timed window.

Two more views of a GPU row, each from a kept library's timer, made by the worker after the rounds on buffers it
keeps (informative only: they are not checked by the judge and no verdict reads them):
- `graph_replay`: for launches too short for per-call events (below ~20 µs the CPU launch cost shows in the gap
  between the events), `triton.testing.do_bench_cudagraph` captures many calls in one CUDA graph and replays it:
  per-call device time without launch overhead. It does not flush L2 between calls (small working sets stay
  resident, as they do inside a captured model step), so it is reported beside the event times, never instead.
- `crosscheck_cupti`: the cross-check against the GPU's own kernel records: torch.profiler over CUPTI activity
  (the method of TileLang's profiler backend "cupti", without importing TileLang into every job) sums the device
  time of every kernel a call launches, on the same executions the events time. Events measure from the first
  launch to the last kernel's end, so the two agree for one-kernel calls and differ by the launch gaps in
  multi-kernel calls.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

FLUSH_BYTES = 256 * 1024 * 1024  # larger than any L2 so far (H200: 50 MB, MI300X: 256 MB Infinity Cache)
FLUSH_RANGE = "opmatrix-l2-flush"
CPU_TIMER = "wallclock (perf_counter around each call)"
GPU_TIMER = "cuda-events (L2 flushed before each call)"


@dataclass
class Timed:
    """What one burst of calls measured: a sample per call (ms), the marks on the shared monotonic clock (CPU: the
    start and end of every call; GPU: the burst's start and its end after the synchronisation), and what each call
    returned (RETURNS_OUTPUT)."""

    samples_ms: list[float]
    marks: list[float]
    timer: str
    returned: list = field(default_factory=list)
    waited_ms: list[float] = field(default_factory=list)  # CPU: each call's wait for a core ([]: not readable)


class Timer:
    """The one timing function of a device kind, with what it allocates once per worker (the GPU's flush buffer)."""

    def __init__(self, torch_device: str) -> None:
        self.torch_device = torch_device
        self._flush = None
        self._waited = run_delay_reader() if torch_device == "cpu" else None

    def time_calls(self, fn: Callable, calls: list[tuple[tuple, object]], deliver: Callable | None = None) -> Timed:
        """Each of `calls` ((inputs, out) pairs) timed once, in order. `deliver(i, returned)`, where given, runs
        right after call i's end mark (outside the timed window)."""
        if self.torch_device == "cpu":
            return self._wallclock(fn, calls, deliver)
        return self._events(fn, calls, deliver)

    def _wallclock(self, fn, calls, deliver) -> Timed:
        marks, waits, clock, waited = [], [], time.perf_counter, self._waited
        for i, (inputs, out) in enumerate(calls):
            outer = clock()
            before = waited()
            start = clock()
            returned = fn(*inputs, out)
            end = clock()
            after = waited()
            # a wait that fell between a read of run_delay and the call's own mark is not the call's: take out what
            # those two gaps lasted (their wall time bounds any wait inside them)
            gaps_ns = 1e9 * ((start - outer) + (clock() - end))
            waits.append(after - before - gaps_ns)
            marks += [start, end]
            if deliver is not None:
                deliver(i, returned)
        samples = [(marks[2 * i + 1] - marks[2 * i]) * 1e3 for i in range(len(calls))]
        readable = self._waited is not None and waited() >= 0  # -1: the kernel keeps no run_delay here
        return Timed(samples, marks, CPU_TIMER,
                     waited_ms=[min(max(w, 0.0) / 1e6, s) for w, s in zip(waits, samples)] if readable else [])

    def _events(self, fn, calls, deliver) -> Timed:
        import torch

        if self._flush is None:
            self._flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device=self.torch_device)
        starts = [torch.cuda.Event(enable_timing=True) for _ in calls]
        ends = [torch.cuda.Event(enable_timing=True) for _ in calls]
        torch.cuda.synchronize()
        begin = time.perf_counter()
        for i, (inputs, out) in enumerate(calls):
            self._flush.zero_()
            starts[i].record()
            returned = fn(*inputs, out)
            ends[i].record()
            if deliver is not None:
                deliver(i, returned)
        torch.cuda.synchronize()  # device-wide: work on any stream has finished when the burst is reported
        finished = time.perf_counter()
        return Timed([s.elapsed_time(e) for s, e in zip(starts, ends)], [begin, finished], GPU_TIMER)

    def flush_times(self, count: int) -> list[float]:
        """GPU: the flush alone, `count` times, each timed by a pair of events (ms)."""
        import torch

        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(count)]
        for start, end in pairs:
            start.record()
            self._flush.zero_()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) for start, end in pairs]


def run_delay_reader():
    """A function returning the calling thread's run_delay so far (ns waiting on a run queue), or -1 where the
    kernel does not keep it."""
    import os

    try:
        fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
    except OSError:
        return lambda: -1

    def read() -> int:
        return int(os.pread(fd, 128, 0).split()[1])
    return read


MIN_REPS, MAX_REPS = 5, 10_000


def time_repeated(fn: Callable[[], object], torch_device: str, warmup_ms: float, rep_ms: float) -> Timed:
    """The same zero-argument call, repeated by the one timing function (Timer.time_calls): after `warmup_ms` of
    warm-up, as many calls as `rep_ms` holds (judged from the first call), every sample returned. For what is not a
    contestant: the device's ceilings, a model's step in `opmatrix validate`."""
    timer = Timer(torch_device)

    def call(*_):
        return fn()

    first = timer.time_calls(call, [((), None)])
    estimate = max(statistics.fmean(first.samples_ms), 1e-4)
    warm = min(MAX_REPS, int(warmup_ms / estimate))
    if warm:
        timer.time_calls(call, [((), None)] * warm)
    reps = max(MIN_REPS, min(MAX_REPS, int(rep_ms / estimate)))
    return timer.time_calls(call, [((), None)] * reps)


def graph_replay(fn: Callable[[], object], rep_ms: float) -> float:
    """The median per-call time (ms) of `fn` replayed from a CUDA graph (no launch overhead, L2 warm). Raises if
    `fn` cannot be captured (host synchronisation, CPU-side control flow on device values)."""
    from triton.testing import do_bench_cudagraph

    samples = do_bench_cudagraph(fn, rep=rep_ms, return_mode="all")
    return statistics.median(float(s) for s in samples)


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
