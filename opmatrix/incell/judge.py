"""The judge of one contest: everything a verdict on one (kernel, workload, dtype) rests on, kept in the cell
runner's process, into which no contestant code is ever imported.

The judge owns the spec it loaded itself, the seeds (from the operating system's random source: opmatrix.incell.
contents), the pristine inputs and their fp64 references, the choice of which calls are checked, the clock a burst
is judged by, and the row. Each worker gets a `Seat`: an arena of shared memory (opmatrix.incell.arena) with
`slots` input and output buffers, written by the judge before every burst. Every call of a burst, correctness trial
or timed call alike, gets input contents no call has seen, of one of the spec's input kinds (INPUT_KINDS: the
correctness trials hold every kind, a round's sets are each of a kind drawn at random), and an output poisoned with
NaN; the worker runs the calls and reports times; the judge then compares the outputs of calls it chose in secret
with their references, checks the inputs are unchanged, places the worker's clock marks on its own clock and weighs
the CPU the worker used (opmatrix.incell.integrity). A checked call and a timed call are the same call: nothing the
worker can observe tells them apart. The baseline, its A/A twin and every contestant of a round get the same
contents, so the pairing stays fair. Stdlib only at import; torch arrives with the first judge.
"""
from __future__ import annotations

import dataclasses
import math
import os
import random
import statistics
import time
from types import ModuleType

from opmatrix.core import status
from opmatrix.core.jobs import DeviceInfo, Settings
from opmatrix.core.result import Result
from opmatrix.incell import arena, correctness, integrity, telemetry
from opmatrix.incell.contents import Contents, SpecFault, input_kinds
from opmatrix.incell.contract import PluginError
from opmatrix.incell.integrity import Cheat
from opmatrix.incell.servers import Server, ServerGone

__all__ = ["Judge", "Seat", "SpecFault", "Cheat"]


def _torch():
    import torch

    return torch


def pinned_threads() -> int:
    """The thread count a CPU worker may use: the toolchain's OMP_NUM_THREADS, else every core of the host."""
    wanted = os.environ.get("OMP_NUM_THREADS", "")
    return int(wanted) if wanted.isdigit() and int(wanted) > 0 else (os.cpu_count() or 1)


class Judge:
    def __init__(self, spec: ModuleType, workload: dict, dtype: str, device: DeviceInfo, settings: Settings,
                 workers: int) -> None:
        """Made before any worker of the contest is seated: a spec that cannot make inputs, an output or an
        informative reference fails here (SpecFault), before any contestant is judged by it."""
        torch = _torch()
        self.spec, self.workload, self.dtype, self.device, self.settings = spec, workload, dtype, device, settings
        torch.set_num_threads(1)  # the judge's own work never competes with a worker's threads for the cores
        self.rng = random.SystemRandom()
        self.tolerance = float(spec.tolerance(dtype))
        self.atol, self.rtol = correctness.elementwise_tolerance(spec, dtype)
        try:
            self.kinds = input_kinds(spec)
        except PluginError as exc:
            raise SpecFault(str(exc)) from None
        try:
            out = spec.make_output(dict(workload), dtype, device.torch)
        except Exception as exc:
            raise SpecFault(f"{spec.__file__}: make_output raised {type(exc).__name__}: {exc}") from None
        if not integrity.is_tensor(out):
            raise SpecFault(f"{spec.__file__}: make_output returned {type(out).__name__}; it returns a tensor")
        self.largest = float(torch.finfo(out.dtype).max) if out.is_floating_point() else None
        sample = self.fresh(len(self.kinds.names), self.kinds.names)  # one set of every kind, each checked here
        for index in range(len(sample)):
            sample.reference(index)
        self.reference_ms = 1e3 * sample.reference_s / len(sample)
        first = sample.inputs[0]
        self.tensor_positions = [i for i, x in enumerate(first) if integrity.is_tensor(x)]
        for kind, made in zip(sample.kinds[1:], sample.inputs[1:]):
            if _form(made) != _form(first):
                raise SpecFault(f"{spec.__file__}: make_inputs gives inputs of kind {kind!r} another form than those "
                                f"of kind {sample.kinds[0]!r} ({_form(made)} against {_form(first)}); every kind "
                                "differs only in its values")
        layouts, self.slot_bytes = arena.plan([first[i] for i in self.tensor_positions] + [out])
        self.input_layouts, self.out_layout = layouts[:-1], layouts[-1]
        self.memory = out.device.type  # where the spec's tensors live: the buffers live there too
        self.is_cpu = self.memory == "cpu"  # and so the worker times by the wall clock, or by device events
        self.out_bytes = out.numel() * out.element_size()
        self.slots = self._pool(workers)
        self.seats: list[Seat] = []  # every worker seated, for what their bursts share (burst_overhead_ms)
        self.threads = pinned_threads()
        self.flush_ms: float | None = 0.0 if self.is_cpu else None  # GPU: measured before the first round
        self.gpu = telemetry.open_for(device)
        self.round: Contents | None = None
        self.order: list[int] = []
        self.private: dict[int, int] = {}  # id(seat) -> its set of this round that no other worker gets
        self.plans: dict[int, tuple[int, int]] = {}  # id(seat) -> (calls, warm-up calls) in this round
        self.checks_wanted = integrity.MIN_CHECKED
        self.note = "" if self.slots >= settings.burst_sets else (
            f"bursts of at most {self.slots} calls: {self.slots} sets of buffers per worker fit in the memory beside "
            f"{workers} workers")

    def _pool(self, workers: int) -> int:
        """How many calls a burst may hold: burst_sets, fewer where that many buffers for every worker (and the
        judge's own pristine copies) would take more than MEMORY_HEADROOM of the free memory."""
        free = integrity.free_bytes(self.memory)
        if free is None:
            return self.settings.burst_sets
        fit = int(integrity.MEMORY_HEADROOM * free // (self.slot_bytes * (workers + 1)))
        return max(1, min(self.settings.burst_sets, fit))

    def seat(self, server: Server, returns_output: bool, timeout_s: float) -> Seat:
        seat = Seat(self, server, returns_output, timeout_s)
        self.seats.append(seat)
        return seat

    def burst_overhead_ms(self) -> float:
        """GPU: a burst's fixed cost outside its calls' events and flushes, the least any of the group's workers
        shows (a worker hiding work raises its own, never the others'); 0 with fewer than two workers to compare."""
        found = [m for s in self.seats if (m := s.accounts.burst_overhead_ms()) is not None]
        return max(0.0, min(found)) if len(found) >= 2 else 0.0

    def fresh(self, count: int, leading: tuple[str, ...] | list[str] = ()) -> Contents:
        """`count` fresh sets: the first of the kinds `leading` names, the others of kinds drawn at random (the
        spec's INPUT_KINDS, alike): any call may hold any kind, and which one is the judge's to know."""
        kinds = list(leading)[:count]
        kinds += [self.rng.choice(self.kinds.names) for _ in range(count - len(kinds))]
        return Contents(self.spec, self.workload, self.dtype, self.device.torch, kinds, self.rng,
                        self.kinds.nonfinite, self.largest)

    # -- correctness: the first call, then the trials; every call checked ------------------------------------------

    def first_call(self, seat: Seat, timeout_s: float) -> float:
        """The first call (it includes a lazy compiler's build), checked as the first correctness trial: the
        judge's seconds for it."""
        started = time.perf_counter()
        seat.run(self.fresh(1), 1, 0, [0], timeout_s, seat.verdict, first=True)
        return time.perf_counter() - started

    def trials(self, seat: Seat, timeout_s: float) -> None:
        """The rest of the correctness trials, every call checked: `trials` calls in all, and at least one of every
        input kind (the kinds the first call did not hold come first, in a secret order); one burst, more only where
        the kinds outnumber the slots. Then the worst of all of them decides (a non-finite output ends them at
        once). Raises Cheat (mismatch)."""
        missing = [kind for kind in self.kinds.names if kind not in seat.kinds_checked]
        self.rng.shuffle(missing)
        count = max(len(missing), min(self.settings.trials - 1, self.slots))
        while count > 0 and seat.verdict.finite:
            burst = min(count, self.slots)
            seat.run(self.fresh(burst, missing[:burst]), burst, 0, list(range(burst)), timeout_s, seat.verdict)
            missing, count = missing[burst:], count - burst
        if not seat.verdict.passed:
            raise Cheat(status.MISMATCH, seat.verdict.explain())

    # -- the rounds (opmatrix.incell.rounds asks for each round, then for each burst) ---------------------------------

    def round_begins(self, visiting: list) -> None:
        """Fresh contents for this round, as many sets as its longest burst needs, each of an input kind drawn at
        random, the same for every contestant; the order in which the judge picks the calls it checks, kept to
        itself."""
        seats = [c.seat for c in visiting]
        if self.flush_ms is None:
            self.flush_ms = _flush_ms()
        for s in seats:
            s.accounts.flush_ms = self.flush_ms
        self.plans = {id(s): self._plan(s) for s in seats}
        count = max(calls for calls, _ in self.plans.values())
        started = time.perf_counter()
        self.round = self.fresh(count + len(seats))  # and one set for each seat alone: see burst()
        self.private = {id(s): count + k for k, s in enumerate(seats)}
        made = time.perf_counter() - started
        for s in seats:
            s.judge_s += made / len(seats)
        self.order = self.rng.sample(range(count), count)
        timed_ms = sum(calls * (s.estimate_ms or 0.0) for s, (calls, _) in zip(seats, self.plans.values()))
        affordable = int(integrity.CHECK_BUDGET * timed_ms / max(self.reference_ms, 1e-3))
        self.checks_wanted = max(integrity.MIN_CHECKED, affordable)

    def burst(self, contestant, timeout_s: float) -> dict:
        """One burst of `contestant` in this round: its calls, its checks; {"samples_ms", "timer", "state"}. A
        contestant caught is gone (ServerGone with its row's status), like one that died."""
        seat = contestant.seat
        calls, warm = self.plans[id(seat)]
        wanted = max(self.checks_wanted, seat.checks_owed(self.settings.rounds))
        checked = sorted([i for i in self.order if warm <= i < calls][:wanted]
                         + [i for i in self.order if i < warm][:1])
        sets = list(range(calls))
        alone = None
        if calls - warm >= integrity.ALONE_AMONG:  # one timed call, in secret, on contents no other worker gets
            alone = self.rng.randrange(warm, calls)
            sets[alone] = self.private[id(seat)]
        try:
            timed = seat.run(self.round, calls, warm, checked, timeout_s, None, sets=sets, alone=alone)
            seat.rounds_run += 1
        except Cheat as cheat:
            seat.server.kill()
            raise ServerGone(Result(status=cheat.status, phase="timing", error=cheat.error)) from None
        self.reference_ms = 1e3 * self.round.reference_s / max(1, len(self.round.references)) or self.reference_ms
        return {"samples_ms": timed, "timer": seat.timer, "state": self.gpu.sample() if self.gpu else None}

    def _plan(self, seat: Seat) -> tuple[int, int]:
        """(calls, warm-up calls) of a seat's next burst: at least burst_ms of timed calls (and burst_calls of
        them), after burst_warmup_ms of warm-up calls, within the slots; judged from its last burst's mean."""
        settings, slots = self.settings, self.slots
        estimate = seat.estimate_ms or settings.burst_ms
        warm = 0 if slots < 4 else min(math.ceil(settings.burst_warmup_ms / estimate), slots // 4)
        timed = max(math.ceil(settings.burst_ms / estimate), settings.burst_calls, 1)
        return min(slots, warm + timed), warm

    def close(self) -> None:
        if self.gpu is not None:
            self.gpu.close()
            self.gpu = None


class Seat:
    """One worker at the judge: its arena and what the judge observed of it."""

    def __init__(self, judge: Judge, server: Server, returns_output: bool, timeout_s: float) -> None:
        self.judge, self.server, self.returns_output = judge, server, returns_output
        self.arena = arena.Arena(judge.slots * judge.slot_bytes, judge.memory)
        self.layouts = []
        for slot in range(judge.slots):
            shift = slot * judge.slot_bytes
            inputs = [None] * (max(judge.tensor_positions, default=-1) + 1)
            for position, layout in zip(judge.tensor_positions, judge.input_layouts):
                inputs[position] = dataclasses.replace(layout, offset=layout.offset + shift)
            self.layouts.append((inputs, dataclasses.replace(judge.out_layout, offset=judge.out_layout.offset + shift)))
        self.views = [([None if layout is None else self.arena.view(layout) for layout in inputs],
                       self.arena.view(out)) for inputs, out in self.layouts]
        description, fds = self.arena.handover()
        server.request({"op": "arena", "arena": description, "slots": self.layouts}, "mapped", timeout_s, fds)
        self.accounts = integrity.Accounts(judge.threads, judge.is_cpu)
        self.verdict = correctness.Verdict(judge.tolerance, judge.atol, judge.rtol)  # the correctness trials
        self.calls = self.checked = 0
        self.kinds_checked: set[str] = set()  # the input kinds of the calls checked so far
        self.judge_s = 0.0
        self.estimate_ms: float | None = None
        self.timer = ""
        self.timed_ms = self.waited_ms = 0.0  # its timed calls' wall time, and how much of it waited for a core
        self.rounds_run = 0  # its bursts in the rounds

    def run(self, contents: Contents, calls: int, warm: int, checked: list[int], timeout_s: float,
            verdict: correctness.Verdict | None, first: bool = False, sets: list[int] | None = None,
            alone: int | None = None) -> list[float]:
        """One burst: the judge writes `calls` sets of `contents` (slot i gets set sets[i], by default set i) into
        the slots and poisons the outputs, the worker runs them, the judge checks what it observed and the outputs
        of `checked` (into `verdict` for the trials, a fresh one per call in the rounds). Call `alone` had contents
        no other worker was given: its time against the others' is kept. The timed calls' samples (after `warm`
        warm-up calls). Raises Cheat and ServerGone."""
        sets = sets or list(range(calls))
        started = time.perf_counter()
        values = self._fill(contents, sets)
        self.judge_s += time.perf_counter() - started
        pid = self.server.proc.pid
        # the scheduler's account of each of its threads (CPU: how long each ran, and waited for a core)
        threads_before = integrity.thread_schedstat(pid) if self.judge.is_cpu else {}
        cpu_before = self.server.cpu_s()
        self.accounts.before(cpu_before, time.perf_counter())
        reply, window = self.server.request({"op": "calls", "slots": list(range(calls)), "values": values,
                                             "first": first}, "called", timeout_s)
        cpu_after = self.server.cpu_s()
        threads_after = integrity.thread_schedstat(pid) if self.judge.is_cpu else {}
        self.accounts.after(cpu_after, window[1])
        started = time.perf_counter()
        try:
            seen = {index: self._snapshot(index) for index in checked}  # before anything else can change them
            samples = self._observed(reply, calls, window, None if None in (cpu_before, cpu_after)
                                     else cpu_after - cpu_before,
                                     integrity.busiest_thread_s(threads_before, threads_after))
            waited = self._waited(reply, samples, integrity.main_thread_waited_s(threads_before, threads_after, pid))
            for index in checked:
                self._check(contents, sets[index], index, *seen[index], verdict)
        finally:
            self.judge_s += time.perf_counter() - started
        self.calls += calls
        self.checked += len(checked)
        own = [s - w for s, w in zip(samples, waited)]
        if alone is not None:
            shared = [i for i in range(warm, calls) if i != alone]
            placebo = self.judge.rng.choice(shared) if len(shared) >= 2 else None
            self.accounts.alone(own[alone], [own[i] for i in shared if i != placebo],
                                None if placebo is None else own[placebo])
        timed = own[warm:]
        self.timed_ms += sum(samples[warm:])
        self.waited_ms += sum(waited[warm:])
        self.estimate_ms = statistics.fmean(timed)
        return timed

    def _fill(self, contents: Contents, sets: list[int]) -> list[dict]:
        """Contents into the slots' inputs (slot i gets set sets[i]), NaN into their outputs (every call's, alike);
        the non-tensor inputs of each call, which travel with the request."""
        values = []
        for slot, index in enumerate(sets):
            inputs, out = self.views[slot]
            made = contents.inputs[index]
            for position in self.judge.tensor_positions:
                inputs[position].copy_(made[position])
            _poison(out)
            values.append({p: v for p, v in enumerate(made) if p not in self.judge.tensor_positions})
        if not self.judge.is_cpu:
            _torch().cuda.synchronize()  # the judge's writes are done before the worker reads
        return values

    def _observed(self, reply: dict, calls: int, window: tuple[float, float], cpu_s: float | None,
                  busiest_s: float | None = None) -> list[float]:
        """The worker's samples, once what it reported agrees with what the judge observed itself."""
        samples = reply.get("samples_ms")
        if (not isinstance(samples, list) or len(samples) != calls
                or not all(isinstance(s, (int, float)) and math.isfinite(s) and s >= 0 for s in samples)):
            raise Cheat(status.SUSPECT, f"its burst of {calls} calls reported samples that are not {calls} "
                        "non-negative times")
        timer = reply.get("timer")
        self.timer = timer[:200] if isinstance(timer, str) else ""
        marks = reply.get("marks")
        fault = integrity.clock_fault(marks, calls, window, self.judge.is_cpu)
        if not fault and not self.judge.is_cpu and sum(samples) / 1e3 > marks[-1] - marks[0] + integrity.MARK_SLACK_S:
            took_ms = 1e3 * (marks[-1] - marks[0])
            fault = (f"its calls' event times add up to {sum(samples):.4g} ms, more than the {took_ms:.4g} ms its "
                     "burst took")
        if not fault:
            allowance = calls * integrity.GAP_MS_PER_CALL / 1e3 + (
                calls * self.judge.out_bytes / (integrity.COPY_GB_S * 1e9) if self.returns_output else 0.0)
            fault = self.accounts.burst(samples, marks, window, cpu_s, allowance, busiest_s)
        if fault:
            raise Cheat(status.SUSPECT, fault)
        return [float(s) for s in samples]

    def _waited(self, reply: dict, samples: list[float], observed_s: float | None) -> list[float]:
        """How long each call waited for a core that another process held (CPU; zeros where not told or not
        readable), once the kernel's own account of the worker's main thread over the burst bears it out: a worker
        that claims more waiting than the kernel recorded is suspect."""
        claimed = reply.get("waited_ms")
        if not self.judge.is_cpu or not claimed or observed_s is None:
            return [0.0] * len(samples)
        if (not isinstance(claimed, list) or len(claimed) != len(samples)
                or not all(isinstance(w, (int, float)) and 0 <= w <= s for w, s in zip(claimed, samples))):
            raise Cheat(status.SUSPECT, "its burst reported waiting times that are not one per call, each within "
                        "its call")
        if sum(claimed) > 1e3 * observed_s + integrity.WAIT_SLACK_MS:
            raise Cheat(status.SUSPECT, f"its calls claim {sum(claimed):.3g} ms of waiting for a core, the kernel "
                        f"recorded {1e3 * observed_s:.3g} ms for the whole burst")
        return [float(w) for w in claimed]

    def _snapshot(self, index: int) -> tuple[list, object]:
        """Copies of call `index`'s input and output buffers as the reply found them: what the worker does to its
        buffers afterwards (a thread finishing late) cannot change what is compared."""
        inputs, out = self.views[index]
        return [None if t is None else t.clone() for t in inputs], out.clone()

    def _check(self, contents: Contents, index: int, slot: int, inputs: list, got,
               verdict: correctness.Verdict | None) -> None:
        """The inputs of the call in `slot` unchanged and its output right (its contents: set `index`)."""
        pristine = contents.inputs[index]
        tensors = tuple(inputs[p] if p in self.judge.tensor_positions else pristine[p] for p in range(len(pristine)))
        written = integrity.changed_inputs(tensors, pristine)
        kind = contents.kinds[index] if len(self.judge.kinds.names) > 1 else ""  # named where the spec has kinds
        where = (f"(make_inputs seed {contents.seeds[index]}" + (f", inputs of kind {kind!r}" if kind else "")
                 + f", call {slot + 1} of its burst)")
        if written:
            raise Cheat(status.MISMATCH, f"writes its inputs {where}: {written}")
        judged = verdict or correctness.Verdict(self.judge.tolerance, self.judge.atol, self.judge.rtol)
        self.kinds_checked.add(contents.kinds[index])
        try:
            reference = contents.reference(index)
            judged.add(got, reference, contents.finite[index], kind if verdict else "")  # a timed call's: `where`
        except correctness.ShapeMismatch as exc:
            raise Cheat(status.MISMATCH, str(exc)) from None
        if verdict is None and not judged.passed:  # a timed call; the trials' verdict is read after the last
            raise Cheat(status.MISMATCH, f"a timed call was wrong: {judged.explain()} {where}")

    def finding(self) -> Result | None:
        """Once the rounds are over: a row for what its bursts together show, else None."""
        found = self.accounts.verdict(self.judge.burst_overhead_ms())
        return None if found is None else Result(status=found[0], phase="timing", error=found[1])

    def checks_owed(self, rounds: int) -> int:
        """Checks this seat's next burst takes at least, so that by the last of `rounds` its row has
        integrity.checks_for() of them (its bursts' warm-up checks counted), however few its bursts' budgets allow."""
        missing = integrity.checks_for() - self.checked
        return max(0, math.ceil(missing / max(1, rounds - self.rounds_run)))

    def catch_chance(self, share: float = integrity.CATCH_SHARE) -> float:
        """The chance that wrong outputs on a random `share` of its calls would have been seen by its checks."""
        return 1.0 - (1.0 - share) ** self.checked

    def close(self) -> None:
        self.arena.close()


def _form(inputs: tuple) -> list:
    """What the judge's buffers are planned from: each tensor input's shape, dtype, device and strides (a
    non-tensor input travels with the request, whatever its value)."""
    return [(tuple(x.shape), str(x.dtype), x.device.type, tuple(x.stride())) if integrity.is_tensor(x) else None
            for x in inputs]


def _flush_ms() -> float:
    """What the worker's L2 flush before each call takes on this GPU (the median of a few, timed by events here)."""
    from opmatrix.incell.measure import Timer

    timer = Timer("cuda")
    timer.time_calls(lambda *_: None, [((), None)])  # allocates the flush buffer
    return statistics.median(timer.flush_times(5))


def _poison(out) -> None:
    """An output no call has written reads as wrong: NaN, or the largest value of an integer dtype."""
    torch = _torch()
    out.fill_(float("nan") if out.is_floating_point() or out.is_complex() else torch.iinfo(out.dtype).max)
