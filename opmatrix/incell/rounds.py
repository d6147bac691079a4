"""Paired, interleaved timing: the contestants of one (kernel, workload, dtype) timed in rounds.

Each round visits every live contestant once, in a freshly shuffled order, and takes one short burst of calls from
each (one contestant on the device at a time). The baseline is in every round, and so is its A/A twin: a second,
independent build of the baseline whose ratio to the baseline measures the noise of these rounds. With
`[run] builds` >= 2 every other contestant is there that many times, each build in its own worker: what varies
from one build to the next (an autotuner's choice, generated code, buffer placement) is then measured, not left to
the next run to reveal. After `rounds` rounds, one more is added for each round that strayed and will be left out
of a row's intervals (opmatrix.core.straying), and more (up to `max_rounds` and `round_extra_s` seconds) while
a contestant's interval on its ratio to the baseline still straddles the decision threshold. With `settle`, those
extra rounds visit only the baseline, its twin and the contestants (with their builds) still undecided: one whose
interval has cleared the threshold leaves for good, so the rounds a question still needs are not stretched by the
timing of answered ones (and any two contestants of one round group share their first rounds, in order).

Who runs a burst is the `bursts` object's business: in a cell, the judge (opmatrix.incell.judge), which hands every
contestant of a round the same fresh contents and checks what came back; in `opmatrix validate`, the model's step in
its own process. A contestant's time in a round is the mean of its burst's timed calls: work moved from one call to
another cannot lower it (a median would reward a kernel doing several calls' work in one).

The stopping rule needs an interval inside the cell, where only the standard library exists: it uses the
distribution-free order-statistic interval of a median (binomial tail). It only decides when to stop; every
interval a report shows is computed again from the stored rounds by scipy in the driver (opmatrix.decide).
Stdlib only.
"""
from __future__ import annotations

import math
import random
import statistics
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

from opmatrix.core import straying
from opmatrix.core.jobs import JobSpec, Settings
from opmatrix.incell.machine_load import OthersMeter
from opmatrix.incell.servers import ServerGone

PROGRESS_EVERY = 10  # rounds between two progress reports (a round of a large group takes seconds on a GPU)
BURST_LIMIT_S = 120.0  # one burst that takes longer than this (or its job's time limit) is a hang


@dataclass
class Contestant:
    job: JobSpec
    server: object  # the worker (opmatrix.incell.servers.Server), or what else runs its bursts
    is_twin: bool = False
    round_ms: list[float] = field(default_factory=list)  # this contestant's median in each round it took part in
    rounds_taken: list[int] = field(default_factory=list)  # the round numbers those medians belong to
    positions: list[int] = field(default_factory=list)  # its place in each round's shuffled order
    samples_ms: list[float] = field(default_factory=list)
    states: list[dict] = field(default_factory=list)  # telemetry at each burst (GPU)
    round_others: list[float | None] = field(default_factory=list)  # cores other processes kept busy in each of its rounds
    timer: str = ""
    failure: ServerGone | None = None
    started_at: str = ""
    block: int = 1  # the group of contestants it was timed with (more than one only when memory ran out)
    round_group: str = ""  # the id of the rounds it took part in
    builds: list[Contestant] = field(default_factory=list)  # [run] builds >= 2: its further builds, timed beside it
    is_extra_build: bool = False  # one of those: timed in the rounds, stored in the first build's row
    notes: list[str] = field(default_factory=list)  # for its row's timing_notes
    rounds_s: float = 0.0  # wall time of the rounds it took part in (every block)
    settled_after: int = 0  # with settle: the rounds it took before its interval cleared the threshold (0: never)
    builds_vary: bool = False  # its backend says its builds vary, or its build was autotuned ([run] builds = 0)
    seat: object = None  # its place at the judge (opmatrix.incell.judge.Seat)
    row: object = None  # its row as far as the judge has made it (opmatrix.core.result.Result)

    @property
    def alive(self) -> bool:
        return self.failure is None

    def end(self) -> None:
        """Stop its worker and give its place at the judge (its buffers) back."""
        self.server.kill()
        if self.seat is not None:
            self.seat.close()


def median_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free interval of the median: order statistics x(k), x(n-k+1) with the largest k whose binomial
    tail P(Bin(n, 1/2) < k) stays within (1 - confidence) / 2. Whole range when n is too small."""
    ordered, n = sorted(values), len(values)
    alpha, k, tail = (1 - confidence) / 2, 0, 0.0
    while k < n // 2:
        nxt = tail + math.comb(n, k) / 2 ** n
        if nxt > alpha:
            break
        tail, k = nxt, k + 1
    if k == 0:
        return ordered[0], ordered[-1]
    return ordered[k - 1], ordered[n - k]


def straddles(ratios: list[float], threshold: float) -> bool:
    """Is the decision still open: does the interval of the median ratio contain the threshold (or its
    reciprocal, for the slower side)?"""
    lo, hi = median_interval(ratios)
    return any(lo <= t <= hi for t in (threshold, 1 / threshold))


class ServerBursts:
    """Bursts run by each contestant's own server (`server.burst(warmup_ms, rep_ms, timeout_s)`): a model step
    in `opmatrix validate`, a scripted one in tests."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def round_begins(self, visiting: list[Contestant]) -> None:
        pass

    def burst(self, c: Contestant, timeout_s: float) -> dict:
        return c.server.burst(self.settings.burst_warmup_ms, burst_ms(c, self.settings), timeout_s)


class Rounds:
    def __init__(self, contestants: list[Contestant], baseline: Contestant | None, settings: Settings,
                 first_round: int = 0, on_round: Callable[[int, float, int], None] | None = None,
                 settle: bool = False, bursts=None) -> None:
        self.contestants, self.baseline, self.settings, self.settle = contestants, baseline, settings, settle
        self.bursts = bursts or ServerBursts(settings)
        # progress: rounds so far, seconds so far, timing servers the rounds still visit
        self.on_round = on_round or (lambda count, seconds, visiting: None)
        self.random = random.SystemRandom()  # an order no contestant can predict
        self.first_round = first_round  # round numbers continue across blocks of one group
        self.count = 0
        self.load = OthersMeter()
        self.id = uuid.uuid4().hex[:12]
        for c in contestants:
            if c.round_group:  # the baseline and its twin, in every block: their rounds span them all
                c.round_group += "+" + self.id
            else:
                c.round_group = self.id

    def run(self) -> None:
        started = time.monotonic()
        while self._live():
            if self.count >= self.settings.rounds + self._strayed() and not self._undecided():
                break
            if self.count >= self.settings.max_rounds:
                break
            if self.count >= self.settings.rounds and time.monotonic() - started > self.settings.round_extra_s:
                break
            if self.settle and self.count >= self.settings.rounds:  # an extra round follows: who still needs it
                self._settle(time.monotonic() - started)
            self._round()
            if self.count % PROGRESS_EVERY == 0:
                self.on_round(self.count, time.monotonic() - started, len(self._visiting()))
        seconds = time.monotonic() - started
        for c in self.contestants:
            if not c.settled_after:
                c.rounds_s += seconds

    def _settle(self, seconds: float) -> None:
        """Each undecided contestant whose interval now clears the threshold leaves the rounds, with its builds."""
        if self.baseline is None or not self.baseline.alive:
            return
        for c in self.contestants:
            if c is self.baseline or c.is_twin or c.is_extra_build or c.settled_after:
                continue
            cohort = [m for m in (c, *c.builds) if m.alive and not m.settled_after]
            if cohort and (not c.alive or all(self._decided(m) for m in cohort)):  # a failed first build fails the row
                for m in cohort:
                    m.settled_after, m.rounds_s = len(m.round_ms), m.rounds_s + seconds
                if c.alive:
                    c.notes.append(f"timed in {len(c.round_ms)} rounds: its interval then cleared the threshold "
                                   "and the extra rounds went on without it")

    def _decided(self, c: Contestant) -> bool:
        ratios = paired_ratios(self.baseline, c)
        return len(ratios) >= 3 and not straddles(ratios, self.settings.min_speedup)

    def _visiting(self) -> list[Contestant]:
        return [c for c in self._live() if not c.settled_after]

    def _live(self) -> list[Contestant]:
        return [c for c in self.contestants if c.alive]

    def _round(self) -> None:
        order = self._visiting()
        self.random.shuffle(order)
        self.load.start()
        self.bursts.round_begins(order)
        timed = []
        for position, c in enumerate(order):
            rep_ms = burst_ms(c, self.settings)
            limit = min(c.job.timeout_s, BURST_LIMIT_S + 20 * (self.settings.burst_warmup_ms + rep_ms) / 1e3)
            try:
                reply = self.bursts.burst(c, limit)
            except ServerGone as gone:
                c.failure = gone
                continue
            c.round_ms.append(statistics.fmean(reply["samples_ms"]))
            c.rounds_taken.append(self.first_round + self.count)
            c.positions.append(position)
            c.samples_ms.extend(reply["samples_ms"])
            c.timer = reply.get("timer", c.timer)
            if reply.get("state"):
                c.states.append(reply["state"])
            timed.append(c)
        others = self.load.stop()
        for c in timed:
            c.round_others.append(others)
        self.count += 1

    def _strayed(self) -> int:
        """How many more rounds the rows need for the rounds that strayed and will be left out of their intervals
        (opmatrix.core.straying): each row's own, its baseline's and its twin's rounds, the most of any row."""
        base = self.baseline
        twin = next((c for c in self._live() if c.is_twin), None)
        most = 0
        for c in self._visiting():
            series = [c.round_ms, aligned(base, c) if base is not None and c is not base else [],
                      aligned(twin, c) if twin is not None and c is not twin else []]
            most = max(most, len(straying.of_rounds(*series).left_out))
        return most

    def _undecided(self) -> bool:
        base = self.baseline
        if base is None or not base.alive:
            return False
        if self._noise_above_target():
            return True
        for c in self._visiting():
            if c is base or c.is_twin:  # the twin is the noise floor, asked for by noise_target alone
                continue
            ratios = paired_ratios(base, c)  # this block's rounds and any before
            if len(ratios) >= 3 and straddles(ratios, self.settings.min_speedup):
                return True
        return False

    def _noise_above_target(self) -> bool:
        """Is the A/A interval (baseline against its twin) still wider than `noise_target` allows?"""
        target = self.settings.noise_target
        twin = next((c for c in self._live() if c.is_twin), None)
        if not target or twin is None:
            return False
        ratios = paired_ratios(self.baseline, twin)
        return len(ratios) >= 3 and noise_halfwidth(ratios) > target


def burst_ms(c: Contestant, settings: Settings) -> float:
    """One burst's timing budget for this contestant: `burst_ms`, or longer for a slow call, so that a burst holds at
    least `burst_calls` calls (judged from its previous round; the first round uses `burst_ms`)."""
    if not settings.burst_calls or not c.round_ms:
        return settings.burst_ms
    return max(settings.burst_ms, settings.burst_calls * c.round_ms[-1])


def noise_halfwidth(ratios: list[float]) -> float:
    """How far the interval of the median A/A ratio (the baseline against its twin) reaches from 1, as a fraction:
    the report's A/A floor (opmatrix.decide.stats.Interval.halfwidth), so a narrow interval off 1 is not taken
    for a floor within the target."""
    lo, hi = median_interval(ratios)
    return max(hi - 1, 1 - lo)


def paired_ratios(base: Contestant, other: Contestant) -> list[float]:
    """baseline time / contestant time in each round both took part in (> 1: the contestant is faster)."""
    mine = dict(zip(other.rounds_taken, other.round_ms))
    return [b / mine[r] for r, b in zip(base.rounds_taken, base.round_ms) if r in mine and mine[r] > 0]


def aligned(base: Contestant | None, other: Contestant) -> list[float]:
    """The baseline's (or twin's) round medians in the rounds `other` took part in, aligned with other.round_ms."""
    if base is None:
        return []
    theirs = dict(zip(base.rounds_taken, base.round_ms))
    return [theirs[r] for r in other.rounds_taken] if all(r in theirs for r in other.rounds_taken) else []
