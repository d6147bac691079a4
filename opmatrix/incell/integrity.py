"""Never trust a contestant: the checks that keep a kernel from passing by doing less work than it claims.

Correctness (opmatrix.incell.phases.check_correctness) and timing (opmatrix.incell.timing_server) both use these:

- Pristine inputs. The reference is computed from a copy of the inputs made before the call, and after the call the
  inputs must still equal that copy: a kernel that writes its inputs (zeroes them, applies relu in place) is
  `mismatch`, "writes its inputs".
- Output form. A returned output (RETURNS_OUTPUT) must be a strided tensor of the row's shape, dtype and device.
- An informative reference. An all-zero or non-finite reference would pass a kernel that computes nothing: the
  spec's inputs must make it informative, else the row is `env_error` naming the spec.
- Rotation. Timed calls alternate over INPUT_SETS seeded input sets, each with its own output buffer and its
  reference made in advance, so a result remembered by pointer is not the answer to the next call. Where two sets
  do not fit in the device's free memory, one is used and the row says so.
- Checked calls. After every burst, CHECKS_PER_BURST more calls, each timed as a burst's calls are (L2 flushed first
  on a GPU) right after WARM_CALLS ordinary ones (fewer when they last WARM_MS). Before each, the input buffers of
  the last ordinary call (the pointers a kernel saw last, whatever the burst's length) receive other contents in place (same pointers, new values: alternately another set's, and fresh seeded
  contents that no call has seen) and its output is poisoned with NaN; right after it returns (on a GPU, after a
  device-wide synchronisation), the output is compared with the reference of those contents and the inputs with
  their pristine copy. A kernel that stops computing after N calls, caches by pointer or by content, is right on
  only some calls, or returns before a thread of its own has finished, fails here: `mismatch` in phase timing, its
  timing discarded.
- Consistency. A checked call does the work a timed call should. Once the rounds are over, given at least
  MIN_FRESH_JUDGED checked calls on fresh contents, when the fastest of them took more than SLOWER x the median of the bursts' medians + SLACK_MS, the
  timed calls skipped work (a cache that only contents never seen defeat): `suspect`. On a GPU, a checked call whose wall time to
  the device-wide synchronisation exceeds WALL_FACTOR x its event time + WALL_SLACK_MS ran work outside the timed
  stream (a side stream): `suspect`. A checked call that leaves more Python threads alive than before it:
  `suspect`.
The rate guard (a row faster than physics allows) is opmatrix.core.metrics'. Stdlib only at import.
"""
from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from opmatrix.core import status
from opmatrix.incell import correctness, measure
from opmatrix.incell.contract import PluginError

INPUT_SETS = 2  # timed calls rotate over this many seeded input sets
CHECKS_PER_BURST = 2  # checked calls after each burst: one with another set's contents, one with fresh contents
MIN_FRESH_JUDGED = 2  # the consistency of checked and timed calls is judged from this many fresh checks on
WARM_CALLS = 3  # unchecked calls right before each checked one, as inside a burst ...
WARM_MS = 20  # ... fewer once they have lasted this long (one call of a slow CPU kernel warms as well as three)
SEED_OFFSET = 1000  # a timing set's seed is settings.seed + SEED_OFFSET + i: never a correctness trial's
FRESH_SEED_OFFSET = 2000  # the fresh contents of the checked calls: settings.seed + FRESH_SEED_OFFSET + n
SLOWER, SLACK_MS = 3.0, 0.05  # checked calls slower than this x the bursts (+ slack): work was skipped while timed
WALL_FACTOR, WALL_SLACK_MS = 1.5, 0.2  # GPU: wall time to the device-wide sync beyond this x the events
MEMORY_HEADROOM = 0.5  # a second set is made only if it would use at most this share of the free device memory


class Cheat(Exception):
    """A contestant caught doing less than it claims: the row's status and why."""

    def __init__(self, status_: str, error: str) -> None:
        super().__init__(error)
        self.status, self.error = status_, error


def _torch():
    import torch

    return torch


def is_tensor(value) -> bool:
    return isinstance(value, _torch().Tensor)


def pristine(inputs: tuple) -> tuple:
    """A copy of every tensor input, made before a call (other inputs are passed as they are)."""
    return tuple(x.clone() if is_tensor(x) else x for x in inputs)


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


def output_form(got, like) -> str:
    """'' when `got` is a strided tensor of `like`'s shape, dtype and device, else what differs."""
    if not is_tensor(got):
        return f"the output is a {type(got).__name__}, not a tensor"
    torch, wrong = _torch(), []
    for what, mine, theirs in (("shape", tuple(got.shape), tuple(like.shape)), ("dtype", got.dtype, like.dtype),
                               ("device", got.device, like.device), ("layout", got.layout, torch.strided)):
        if mine != theirs:
            wrong.append(f"{what} {mine} (the row's: {theirs})")
    return "the output has " + ", ".join(wrong) if wrong else ""


def require_informative(reference, spec_file: str) -> None:
    """An all-zero or non-finite reference cannot tell a kernel that computes from one that does nothing."""
    torch = _torch()
    if not bool(torch.isfinite(reference).all()):
        raise PluginError(f"{spec_file}: reference() gave non-finite values for make_inputs' inputs; the check "
                          "needs a finite reference")
    if reference.numel() == 0 or float(reference.abs().max()) == 0.0:
        raise PluginError(f"{spec_file}: reference() is all zero for make_inputs' inputs, so an output that is "
                          "never computed would pass; make_inputs must give inputs whose reference is informative")


def misbehaved(got, like, inputs: tuple, kept: tuple) -> str:
    """Why one call broke the contract before its values are even compared, or '': an output of the wrong form, or
    inputs that no longer equal their pristine copy."""
    written = changed_inputs(inputs, kept)
    return output_form(got, like) or (f"writes its inputs: {written}" if written else "")


def check_output(got, like, kept: tuple, inputs: tuple, verdict: correctness.Verdict, reference) -> str:
    """Why one call's output (or its inputs afterwards) is wrong, or ''. `verdict` accumulates the comparison."""
    broke = misbehaved(got, like, inputs, kept)
    if broke:
        return broke
    try:
        verdict.add(got, reference)
    except correctness.ShapeMismatch as exc:
        return str(exc)
    return "" if verdict.passed else verdict.explain()


@dataclass
class InputSet:
    """One set of timing inputs: the buffers a timed call gets, its output buffer, the pristine contents of those
    buffers and their reference (float32 for 16- and 32-bit rows, which rounds it far below the tolerances)."""

    inputs: tuple
    out: object
    kept: tuple
    reference: object

    def nbytes(self) -> int:
        tensors = [x for x in (*self.inputs, self.out, *self.kept, self.reference) if is_tensor(x)]
        return sum(x.numel() * x.element_size() for x in tensors)


@dataclass
class Checks:
    """What the checked calls of the bursts so far saw."""

    checked_ms: list[float] = field(default_factory=list)  # every passed checked call's time, in order
    fresh_ms: list[float] = field(default_factory=list)  # those of the calls with fresh contents
    burst_medians_ms: list[float] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return len(self.checked_ms)


class TimedCall:
    """The zero-argument call a timer repeats (rotating over the input sets), and the checked calls after a burst."""

    def __init__(self, fn: Callable, sets: list[InputSet], returns_output: bool, torch_device: str,
                 make_verdict: Callable[[], correctness.Verdict], fresh: Callable[[int], tuple[tuple, object]],
                 first_fresh_seed: int) -> None:
        """`fresh(seed)`: new inputs and their reference, contents no call has seen (seeds from first_fresh_seed)."""
        self.fn, self.sets, self.returns_output = fn, sets, returns_output
        self.torch_device, self.make_verdict = torch_device, make_verdict
        self.fresh, self.next_fresh_seed = fresh, first_fresh_seed
        self.next = 0
        self.checks = Checks()
        self._flush = None
        self._pending = self._make_fresh()

    def __call__(self):
        i = self.next
        self.next = (i + 1) % len(self.sets)
        s = self.sets[i]
        return self.fn(*s.inputs, s.out)

    def after_burst(self, samples_ms: list[float]) -> None:
        """The checked calls (one with another set's contents, one with fresh contents). Raises Cheat."""
        self.checks.burst_medians_ms.append(statistics.median(samples_ms))
        for k in range(CHECKS_PER_BURST):
            self._checked_call(fresh=k % 2 == 1)
        self._pending = self._make_fresh()

    def _make_fresh(self) -> tuple[tuple, object]:
        """The next fresh contents and their reference, made after a burst's checks rather than right before a
        checked call: on a CPU the float64 reference's threads spin on after it for a while and would slow the
        checked call they share the cores with."""
        seed, self.next_fresh_seed = self.next_fresh_seed, self.next_fresh_seed + 1
        return self.fresh(seed)

    def _contents(self, fresh: bool, target: int) -> tuple[tuple, object]:
        """(inputs whose contents go into the checked call's buffers, their reference): fresh ones, or those of
        the set after `target` (its own where there is one set)."""
        if fresh:
            return self._pending
        source = self.sets[(target + 1) % len(self.sets)]
        return source.kept, source.reference

    def _warm(self) -> int:
        """Up to WARM_CALLS ordinary calls (fewer once they last WARM_MS), so the checked call finds the device (or
        the CPU's threads) as a burst left it. Returns the set of the last one: the checked call uses its buffers,
        so a kernel that remembers its last call's pointers (and its answer) meets those very pointers."""
        started = time.perf_counter()
        for _ in range(WARM_CALLS):
            last = self.next
            self()
            if (time.perf_counter() - started) * 1e3 >= WARM_MS:  # a GPU's launches return at once: all three
                break
        return last

    def _checked_call(self, fresh: bool) -> None:
        index = self._warm()
        target = self.sets[index]
        contents, reference = self._contents(fresh, index)
        for buffer, value in zip(target.inputs, contents):
            if is_tensor(buffer):
                buffer.copy_(value)
        target.out.fill_(float("nan"))
        threads = threading.active_count()
        event_ms, wall_ms, returned = self._time_once(target)
        got = returned if self.returns_output else target.out
        wrong = check_output(got, target.out, contents, target.inputs, self.make_verdict(), reference)
        for buffer, value in zip(target.inputs, target.kept):  # the set's own contents again
            if is_tensor(buffer):
                buffer.copy_(value)
        what = "fresh contents" if fresh else "another set's contents"
        if wrong:
            raise Cheat(status.MISMATCH, f"a checked timed call (after burst {len(self.checks.burst_medians_ms)}: "
                        f"{what} in its input buffers, its output poisoned) was wrong: {wrong}")
        if threading.active_count() > threads:
            raise Cheat(status.SUSPECT, f"a timed call left {threading.active_count() - threads} more thread(s) "
                        "running after it returned: its work is not all inside the timed region")
        if self.torch_device != "cpu" and wall_ms > WALL_FACTOR * event_ms + WALL_SLACK_MS:
            raise Cheat(status.SUSPECT, f"a checked call took {wall_ms:.4g} ms to the device-wide synchronisation "
                        f"but {event_ms:.4g} ms between its stream's events (allowed: {WALL_FACTOR:g} x + "
                        f"{WALL_SLACK_MS:g} ms): work ran outside the timed stream")
        self.checks.checked_ms.append(event_ms)
        if fresh:
            self.checks.fresh_ms.append(event_ms)

    def _time_once(self, s: InputSet) -> tuple[float, float, object]:
        """(timed ms, wall ms to a device-wide synchronisation, what the call returned), timed as a burst's calls
        are: wall clock on a CPU; events on the current stream after an L2 flush on a GPU."""
        if self.torch_device == "cpu":
            start = time.perf_counter()
            returned = self.fn(*s.inputs, s.out)
            ms = (time.perf_counter() - start) * 1e3
            return ms, ms, returned
        torch = _torch()
        if self._flush is None:
            self._flush = torch.empty(measure.FLUSH_BYTES // 4, dtype=torch.int32, device=self.torch_device)
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        self._flush.zero_()
        begin.record()
        wall = time.perf_counter()
        returned = self.fn(*s.inputs, s.out)
        end.record()
        torch.cuda.synchronize()  # device-wide: work on any stream counts
        return begin.elapsed_time(end), (time.perf_counter() - wall) * 1e3, returned

    def judge(self) -> None:
        """Once the rounds are over: the fastest checked call on fresh contents against the bursts' median. No call
        can be fast on contents it has never seen without doing the work, while an honest call is slow only when
        the machine interrupted it (a time slice lost on a busy CPU), which the fastest of all the rounds' fresh
        checks escapes. Raises Cheat (suspect)."""
        if len(self.checks.fresh_ms) < MIN_FRESH_JUDGED:
            return
        fastest = min(self.checks.fresh_ms)
        timed = statistics.median(self.checks.burst_medians_ms)
        if fastest > SLOWER * timed + SLACK_MS:
            raise Cheat(status.SUSPECT, f"its fastest checked call on fresh contents took {fastest:.4g} ms, its timed "
                        f"calls a median {timed:.4g} ms: more than {SLOWER:g} x + {SLACK_MS:g} ms, so the timed calls "
                        f"skipped work ({len(self.checks.fresh_ms)} checked calls on fresh contents over "
                        f"{len(self.checks.burst_medians_ms)} bursts)")


def reference_of(reference: Callable[[tuple], object], inputs: tuple):
    """The reference of pristine inputs, kept in float32 where the inputs are at most 32-bit (far below any
    tolerance, half the memory of float64)."""
    ref = reference(inputs)
    return ref.float() if ref.dtype == _torch().float64 and kept_precision(inputs) <= 32 else ref


def make_sets(make_inputs: Callable[[int], tuple], make_output: Callable[[], object],
              reference: Callable[[tuple], object], first_seed: int, torch_device: str) -> tuple[list[InputSet], str]:
    """Up to INPUT_SETS input sets (seeds first_seed, first_seed + 1, ...), each with its reference computed from
    its pristine contents; fewer where the device's free memory does not hold another (then a note says so)."""
    sets: list[InputSet] = []
    for i in range(INPUT_SETS):
        if sets:
            room = free_bytes(torch_device)
            need = sets[0].nbytes()
            if room is not None and need > MEMORY_HEADROOM * room:
                return sets, (f"{len(sets)} input set(s) for timing: another needs {need / 2 ** 30:.2f} GiB, "
                              f"{room / 2 ** 30:.2f} GiB free; timed calls are not rotated, so the checked calls "
                              "cannot change the inputs' contents in place")
        inputs = make_inputs(first_seed + i)
        kept = pristine(inputs)
        sets.append(InputSet(inputs, make_output(), kept, reference_of(reference, kept)))
    return sets, ""


def kept_precision(inputs: tuple) -> int:
    """The widest floating input, in bits (64 keeps an fp64 reference)."""
    widths = [x.element_size() * 8 for x in inputs if is_tensor(x) and x.is_floating_point()]
    return max(widths, default=64)


def free_bytes(torch_device: str) -> int | None:
    """Free memory where the timing sets live: the GPU's (torch.cuda.mem_get_info), or the host's available
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
