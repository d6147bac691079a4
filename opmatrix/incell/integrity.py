"""Never trust a contestant: what the judge checks, from its own process, about every burst of calls a worker ran.

The judge (opmatrix.incell.judge) knows what it handed over and what it observed itself; the worker only reports.
- Outputs. Every call gets input contents no call has seen, made from seeds the worker never learns, and an output
  buffer poisoned with NaN; which calls of a burst are compared with the fp64 reference is chosen by the judge and
  never told (`choose_checked`), so a contestant cannot do the work only where it is looked at. A call's inputs
  must still equal what the judge wrote (`changed_inputs`).
- The clock. The worker's marks are read on the monotonic clock every process shares, so the judge places them on
  its own: they must lie inside the time between its request and the reply, in order (`clock_fault`). A clock the
  contestant slowed or shifted lands outside.
- CPU time, as the kernel accounts it for the worker's process and its children (`Accounts`): during a burst at
  most the toolchain's thread count times the time its busiest thread ran (more: the calls ran threads the
  toolchain does not allow, or the marks hide work; on a busy machine the busiest thread runs for less than the
  burst's wall time, and so do the others); between its bursts, nearly none (a contestant working while the others are
  timed finishes its own work late, or slows theirs).
- The calls' times themselves (`uneven`): a burst where a few calls take the time and most take almost none is one
  call doing several calls' work (batch-and-skip).
The rate guard (a row faster than physics allows) is opmatrix.core.metrics'. Stdlib only at import.
"""
from __future__ import annotations

import math
import os
import random
import statistics
import time
from dataclasses import dataclass, field

from opmatrix.incell.contract import PluginError

MARK_SLACK_S = 20e-6  # the marks may sit this far outside the judge's window (two reads of one clock)
GAP_MS_PER_CALL = 0.05  # the worker's own loop between two calls' marks, per call (a copy of a returned output aside)
COPY_GB_S = 1.0  # the slowest copy a returned output's delivery is allowed between two calls' marks
WAIT_SLACK_MS = 0.05  # the waits a worker reports may exceed the kernel's count for the burst by this (two reads)
CORE_SLACK = 0.5  # cores beyond the toolchain's thread count a burst may show (the channel, the loop)
CPU_SLACK_S = 0.002  # CPU seconds of a burst not counted against it (reading the request, sending the reply)
# CPU a worker may use between two of its bursts (blocked, waiting for the next request, it uses none): the
# OpenMP threads of a multi-threaded call spin on for a few ms after it (measured: ~10 ms per wait with 2 threads)
IDLE_BASE_S, IDLE_PER_THREAD_S = 0.002, 0.02  # allowed per wait: base + per thread beyond the first
IDLE_EXCESS_S = 0.02  # a row whose CPU beyond that allowance, over all its waits, exceeds this
# On a GPU the contestants' time is the device's: a worker's CPU between bursts (a compiler's pool of subprocesses
# starting, a JIT's background thread: torch.compile's used 0.1-0.17 of a core on an H100 host of 16) takes nothing
# from the others unless it holds a good share of a core; there it must also exceed this share of its waits' wall.
IDLE_GPU_SHARE = 0.5
# GPU: a burst's time per call beyond its calls' event times and the L2 flush before each, in most bursts, above
# this (ms) and above the events themselves: the calls' device work ran outside their events (another stream, a thread
# launching after the call returned). Each burst's own fixed cost (the request and reply, two synchronisations, the
# worker's loop) is the least any worker of the group shows per burst (Judge.burst_overhead_ms): on an H100 it was
# 1.9 ms a burst for every contestant of a 128 MB rmsnorm whose memory held 7 calls a burst, 0.27 ms a call, which
# read as hidden work against its 0.15 ms events before it was taken out.
HIDDEN_MS = 0.1
# a burst where at least UNEVEN_SHARE of the calls took under UNEVEN_BELOW of its mean, in more than UNEVEN_BURSTS of
# a row's bursts: calls doing the work of others. A time slice lost to another process inflates one call, and would
# have to exceed nine times the whole burst's work, in most bursts, to look like this.
UNEVEN_BELOW, UNEVEN_SHARE, UNEVEN_BURSTS = 0.1, 0.5, 0.75
# every burst of at least ALONE_AMONG timed calls has one, chosen in secret, on contents no other worker is given.
# Honest, that call is one more like the others (its ratio to their median: ~1, +-20 % on a busy CPU); a row where
# the upper quartile of those ratios over at least ALONE_BURSTS bursts exceeds ALONE_SLOWER is faster on contents
# another worker has seen: answers shared between processes (the builds or variants of one contestant), which pays
# only in the rounds where another worker of it went first
# (calls under ALONE_MIN_MS are left out: a few-microsecond CPU call's time scatters by more than that on its own)
# The bar is ALONE_SLOWER times the upper quartile of a control, another timed call of the same bursts chosen at
# random (at least 1): a noisy call (torch.compile's ~0.1 ms CPU call on a loaded 2-core machine, two builds of it
# in each round) strays as far on shared contents as alone, an answer-sharer does not.
ALONE_AMONG, ALONE_SLOWER, ALONE_BURSTS, ALONE_MIN_MS = 3, 2.0, 8, 0.1
CHECK_BUDGET = 0.25  # the references of a round's checked calls may cost this share of the round's timed time
MIN_CHECKED = 2  # calls checked per burst, at least (all of them where a burst has fewer)
CATCH_SHARE = 0.1  # rows state the chance that wrong outputs on this share of the timed calls would be caught
CATCH_WANTED = 0.99  # every row is checked at least enough for this chance (on the CPU's default 10 rounds: 44 checks)
MEMORY_HEADROOM = 0.5  # the judge's buffers take at most this share of the free memory where they live


class Cheat(Exception):
    """A contestant caught doing less than it claims, or where it should not: the row's status and why."""

    def __init__(self, status_: str, error: str) -> None:
        super().__init__(error)
        self.status, self.error = status_, error


def _torch():
    import torch

    return torch


def is_tensor(value) -> bool:
    return isinstance(value, _torch().Tensor)


def changed_inputs(inputs: tuple, kept: tuple) -> str:
    """'' when every tensor input still equals its pristine copy, else which changed and how many elements."""
    torch, changed = _torch(), []
    for position, (now, before) in enumerate(zip(inputs, kept)):
        if not is_tensor(now):
            continue
        differ = (now != before) & ~(torch.isnan(now) & torch.isnan(before)) if now.is_floating_point() \
            else now != before
        count = int(differ.sum())
        if count:
            changed.append(f"input {position} {tuple(now.shape)}: {count} of {now.numel()} elements changed")
    return "; ".join(changed)


def require_informative(reference, spec_file: str, kind: str = "", nonfinite: bool = False,
                        largest: float | None = None) -> bool:
    """An all-zero reference cannot tell a kernel that computes from one that does nothing, nor can a non-finite one
    where the inputs' kind holds no special values (`nonfinite`: the spec declares it in NONFINITE_KINDS, and the
    reference then defines the expected inf and NaN); a finite reference beyond `largest` (the output dtype's
    largest value) cannot be written by a correct kernel. Returns whether the reference is finite everywhere."""
    torch = _torch()
    if not is_tensor(reference):
        raise PluginError(f"{spec_file}: reference() returned {type(reference).__name__}; it returns a tensor")
    of = f"make_inputs' inputs of kind {kind!r}" if kind else "make_inputs' inputs"
    held = torch.isfinite(reference)
    finite = bool(held.all())
    if not finite and not nonfinite:
        raise PluginError(f"{spec_file}: reference() gave non-finite values for {of}; the check needs a finite "
                          "reference (a kind whose inputs hold inf or NaN where the operation defines them is "
                          "declared in NONFINITE_KINDS)")
    values = reference if finite else reference[held]
    top = float(values.abs().max()) if values.numel() else 0.0
    if top == 0.0:
        raise PluginError(f"{spec_file}: reference() is all zero{'' if finite else ' where finite'} for {of}, so an "
                          "output that is never computed would pass; make_inputs must give inputs whose reference is "
                          "informative")
    if largest is not None and top > largest:
        raise PluginError(f"{spec_file}: reference() reaches {top:.6g} for {of}, beyond the largest finite value of "
                          f"the output's dtype ({largest:.6g}): a correct kernel cannot write it; make_inputs must "
                          "keep the result in the dtype's range")
    return finite


def reference_of(reference, inputs: tuple):
    """The reference of pristine inputs, kept in float32 where the inputs are at most 32-bit (far below any
    tolerance, half the memory of float64)."""
    ref = reference(inputs)
    return ref.float() if is_tensor(ref) and ref.dtype == _torch().float64 and kept_precision(inputs) <= 32 else ref


def kept_precision(inputs: tuple) -> int:
    """The widest floating input, in bits (64 keeps an fp64 reference)."""
    widths = [x.element_size() * 8 for x in inputs if is_tensor(x) and x.is_floating_point()]
    return max(widths, default=64)


def free_bytes(torch_device: str) -> int | None:
    """Free memory where the judge's buffers live: the GPU's (torch.cuda.mem_get_info), or the host's available
    memory (/proc/meminfo) for a CPU cell; None where neither can be read."""
    if torch_device != "cpu":
        return int(_torch().cuda.mem_get_info()[0])
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def choose_checked(calls: int, warm: int, wanted: int, rng: random.Random) -> list[int]:
    """Which of a burst's calls the judge compares with their references: `wanted` of the timed ones (at least
    MIN_CHECKED, all where there are fewer), and one warm-up call where there is any, uniformly at random."""
    timed = list(range(warm, calls))
    chosen = rng.sample(timed, min(len(timed), max(MIN_CHECKED, wanted)))
    if warm:
        chosen.append(rng.randrange(warm))
    return sorted(chosen)


def checks_for(chance: float = CATCH_WANTED, share: float = CATCH_SHARE) -> int:
    """How many checked calls give `chance` of seeing wrong outputs on a random `share` of a row's calls."""
    return math.ceil(math.log(1.0 - chance) / math.log(1.0 - share))


def miss_chance(calls: int, checked: int, share: float = CATCH_SHARE) -> float:
    """The chance that `checked` calls chosen at random from `calls` all miss the ceil(share x calls) wrong ones."""
    wrong = math.ceil(share * calls)
    if checked + wrong > calls:
        return 0.0
    return math.comb(calls - wrong, checked) / math.comb(calls, checked)


def clock_fault(marks: list, calls: int, window: tuple[float, float], device_is_cpu: bool) -> str:
    """Why the worker's marks cannot be right, or ''. CPU: a start and an end per call; GPU: the burst's start and
    its end after the synchronisation. Both on the monotonic clock the judge reads: inside its window, in order."""
    expected = 2 * calls if device_is_cpu else 2
    if (not isinstance(marks, list) or len(marks) != expected
            or not all(isinstance(m, (int, float)) and math.isfinite(m) for m in marks)):
        return f"its burst reported {len(marks) if isinstance(marks, list) else 'no'} clock marks, {expected} expected"
    sent, received = window
    if marks[0] < sent - MARK_SLACK_S or marks[-1] > received + MARK_SLACK_S:
        return (f"its clock marks [{marks[0]:.6f}, {marks[-1]:.6f}] fall outside the judge's own window "
                f"[{sent:.6f}, {received:.6f}] on the same monotonic clock: its clock is not the system's")
    if any(b < a for a, b in zip(marks, marks[1:])):
        return "its clock marks go backwards"
    return ""


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds of a process (every thread, the finished ones included) and of its live children, as the kernel
    accounts them (the process CPU clock of another process: clock_gettime on its pid's clock id); None when the
    process is gone."""
    total = 0.0
    for current in _tree(pid):
        try:
            total += time.clock_gettime((~current << 3) | 2)
        except (OSError, OverflowError):
            if current == pid:
                return None
    return total


def thread_schedstat(pid: int) -> dict[tuple[int, int], tuple[float, float]]:
    """Each live thread of a process and of its live children, by (process, thread): the seconds it has run and the
    seconds it has waited for a core so far, as the kernel's scheduler keeps them (/proc/<pid>/task/<tid>/schedstat,
    in nanoseconds); {} where unreadable."""
    found = {}
    for current in _tree(pid):
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{current}/task/{task}/schedstat") as fh:
                    ran, waited = fh.read().split()[:2]
                found[(current, int(task))] = (int(ran) / 1e9, int(waited) / 1e9)
            except (OSError, ValueError):
                continue
    return found


def busiest_thread_s(before: dict, after: dict) -> float | None:
    """The most CPU any one thread ran between two thread_schedstat readings (a thread born between them counts
    from 0); None where either reading saw no thread."""
    if not before or not after:
        return None
    return max(ran - before.get(k, (0.0, 0.0))[0] for k, (ran, _) in after.items())


def main_thread_waited_s(before: dict, after: dict, pid: int) -> float | None:
    """How long the process's main thread waited for a core between two thread_schedstat readings; None where
    either reading lacks it."""
    if (pid, pid) not in before or (pid, pid) not in after:
        return None
    return after[(pid, pid)][1] - before[(pid, pid)][1]


def _tree(pid: int):
    """A process and its live descendants, each once."""
    seen = set()
    stack = [pid]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        yield current
        stack.extend(_children(current))


def _children(pid: int) -> list[int]:
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                found.extend(int(p) for p in fh.read().split())
        except (OSError, ValueError):
            continue
    return found


@dataclass
class Accounts:
    """What the judge observed of one worker across its bursts, judged once the rounds are over."""

    threads: int  # the thread count the toolchain pins (the host's cores where it pins none)
    device_is_cpu: bool
    flush_ms: float = 0.0  # GPU: what the judge measured the L2 flush before each call to take
    last_cpu_s: float | None = None
    idle_cpu_s: float = 0.0
    idle_wall_s: float = 0.0
    last_end: float | None = None
    uneven_bursts: int = 0
    bursts: int = 0
    unaccounted: list[float] = field(default_factory=list)  # per burst: share of the calls' span their marks leave out
    alone_ratios: list[float] = field(default_factory=list)  # per burst: its call alone / the median of the others
    # per burst, the control: another timed call, on shared contents, chosen at random, against the same median: what
    # a call of this contestant strays by in these bursts when nothing sets it apart
    placebo_ratios: list[float] = field(default_factory=list)
    hidden_ms: list[float] = field(default_factory=list)  # GPU, per burst: time outside events and flush, in all
    burst_calls: list[int] = field(default_factory=list)  # GPU, per burst: its calls
    event_ms: list[float] = field(default_factory=list)  # GPU, per burst: the calls' mean event time

    def before(self, cpu_s: float | None, now: float) -> None:
        """Right before a request: what the worker used since its last burst ended (beyond the allowance)."""
        if cpu_s is not None and self.last_cpu_s is not None and self.last_end is not None:
            allowed = IDLE_BASE_S + IDLE_PER_THREAD_S * (self.threads - 1)
            self.idle_cpu_s += max(0.0, cpu_s - self.last_cpu_s - allowed)
            self.idle_wall_s += max(0.0, now - self.last_end)

    def after(self, cpu_s: float | None, now: float) -> None:
        self.last_cpu_s, self.last_end = cpu_s, now

    def burst(self, samples: list[float], marks: list[float], window: tuple[float, float], cpu_s: float | None,
              gap_allowance_s: float, busiest_s: float | None = None) -> str:
        """Record one burst; '' or why it cannot be right on its own (more cores than pinned). The CPU it used is
        weighed against the time its busiest thread ran (`busiest_s`), where known, not against the wall time: on
        a busy machine two threads that each ran half the burst used one core's worth of CPU in all, and only
        their overlap shows that more than one ran."""
        self.bursts += 1
        self.uneven_bursts += uneven(samples)
        if not self.device_is_cpu:
            mean_ms = statistics.fmean(samples)
            self.event_ms.append(mean_ms)
            self.hidden_ms.append(1e3 * (window[1] - window[0]) - len(samples) * (mean_ms + self.flush_ms))
            self.burst_calls.append(len(samples))
            return ""
        span = marks[-1] - marks[0]
        called = sum(samples) / 1e3
        if span > 0:
            self.unaccounted.append(max(0.0, span - called - gap_allowance_s) / span)
        wall = window[1] - window[0]
        ran = wall if busiest_s is None else min(wall, busiest_s)
        if cpu_s is not None and ran > 0 and cpu_s - CPU_SLACK_S > (self.threads + CORE_SLACK) * ran:
            return (f"used {cpu_s / ran:.2f} cores while its burst was timed ({cpu_s * 1e3:.1f} ms of CPU while its "
                    f"busiest thread ran {ran * 1e3:.1f} ms, in {wall * 1e3:.1f} ms), where the toolchain pins "
                    f"{self.threads} thread(s)")
        return ""

    def alone(self, own_ms: float, others_ms: list[float], placebo_ms: float | None = None) -> None:
        """A burst's call on contents no other worker was given, against the burst's other timed calls (and a
        control: another of its calls, on shared contents, against the same median)."""
        typical = statistics.median(others_ms) if others_ms else 0.0
        if typical >= ALONE_MIN_MS:
            self.alone_ratios.append(own_ms / typical)
            if placebo_ms is not None:
                self.placebo_ratios.append(placebo_ms / typical)

    def burst_overhead_ms(self) -> float | None:
        """GPU: the median of its bursts' time outside events and flush (None with fewer than two bursts)."""
        return statistics.median(self.hidden_ms) if len(self.hidden_ms) >= 2 else None

    def verdict(self, burst_overhead_ms: float = 0.0) -> tuple[str, str] | None:
        """(status, why) for a row the bursts together show to be dishonest, else None. burst_overhead_ms: the
        fixed cost of a burst the group's workers share (GPU)."""
        busy_share = self.idle_cpu_s / self.idle_wall_s if self.idle_wall_s > 0 else 0.0
        if self.idle_cpu_s > IDLE_EXCESS_S and (self.device_is_cpu or busy_share > IDLE_GPU_SHARE):
            return "suspect", (f"used {self.idle_cpu_s:.3f} s of CPU while it was not being timed (over "
                               f"{self.idle_wall_s:.2f} s of waiting between its bursts, beyond what a blocked worker "
                               "uses): work done outside its timed calls, or taken from the contestants timed "
                               "meanwhile")
        if self.bursts >= 2 and self.uneven_bursts > UNEVEN_BURSTS * self.bursts:
            return "suspect", (f"in {self.uneven_bursts} of {self.bursts} bursts at least {UNEVEN_SHARE:.0%} of its "
                               f"calls took under {UNEVEN_BELOW:.0%} of the burst's mean: calls doing the work of "
                               "others (batch-and-skip)")
        if len(self.hidden_ms) >= 2:
            hidden = statistics.median(max(0.0, h - burst_overhead_ms) / n for h, n in zip(self.hidden_ms,
                                                                                           self.burst_calls))
            events = statistics.median(self.event_ms)
            if hidden > max(HIDDEN_MS, events):
                return "suspect", (f"its bursts took {hidden:.3g} ms per call beyond its calls' events ({events:.3g} "
                                   f"ms), the L2 flush before each ({self.flush_ms:.3g} ms) and a burst's own cost "
                                   f"({burst_overhead_ms:.3g} ms, the least of its group's), the median over its "
                                   "bursts: its device work ran outside the timed events (another stream, or work "
                                   "launched after the call returned)")
        if len(self.alone_ratios) >= ALONE_BURSTS:
            upper = upper_quartile(self.alone_ratios)
            control = upper_quartile(self.placebo_ratios) if len(self.placebo_ratios) >= ALONE_BURSTS else 1.0
            if upper > ALONE_SLOWER * max(1.0, control):
                return "suspect", (f"in a quarter of its {len(self.alone_ratios)} bursts its call on contents no "
                                   f"other worker had been given took at least {upper:.2f} x the median of its others "
                                   f"(another of its calls, chosen at random: {control:.2f} x): it is faster on "
                                   "contents another process has seen, or leaves work running outside its calls")
        if len(self.unaccounted) >= 2 and statistics.median(self.unaccounted) > 0.1:
            return "suspect", (f"its clock marks leave {statistics.median(self.unaccounted):.0%} of its bursts "
                               "between its calls (the median over its bursts): time taken out of its calls")
        return None


def upper_quartile(values: list[float]) -> float:
    return statistics.quantiles(values, n=4, method="inclusive")[-1]


def uneven(samples: list[float]) -> bool:
    """A burst where a share of the calls took almost none of the time: one call doing others' work."""
    if len(samples) < 4:
        return False
    mean = statistics.fmean(samples)
    quick = sum(s < UNEVEN_BELOW * mean for s in samples)
    return mean > 0 and quick >= UNEVEN_SHARE * len(samples)
