"""The end-to-end measurement: the output check, then the unmodified step and the swapped steps timed paired and
interleaved, with the machinery of a matrix run's kernels (one mechanism):

- rounds: opmatrix.incell.rounds.Rounds, each round a freshly shuffled order of the contestants, one burst each;
  contestants are the unmodified step (the baseline), its A/A twin (the unmodified step again: the noise floor of
  these rounds), each swap alone, and all swaps together. More rounds (up to max_rounds and round_extra_s) while a
  ratio's interval still straddles MIN_GAIN;
- a burst: opmatrix.incell.measure.time_repeated, the one timer (CUDA events around each call after an L2 flush on
  a GPU, perf_counter around each call on the CPU), with the swap installed before the burst and removed after (the
  patching is never timed); a round's time is the mean of the burst's calls;
- intervals: the per-round ratio baseline / contestant (opmatrix.incell.rounds.paired_ratios; > 1: the swap is
  faster), its median with the scipy bootstrap interval of the kernel verdicts (opmatrix.decide.stats).
The step is the same zero-argument callable every time: same model object, same inputs.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass

from opmatrix.core.jobs import JobSpec, Settings
from opmatrix.decide import stats
from opmatrix.incell import measure as incell_measure
from opmatrix.incell.rounds import Contestant, Rounds, paired_ratios
from opmatrix.validate import swap as swapping

BASELINE, TWIN, ALL = "unmodified", "unmodified (A/A twin)", "all swaps"
MIN_GAIN = 1.01  # more rounds while an interval straddles a 1 % gain (or loss)
BURST_STEPS = 5  # a burst holds at least this many steps ([run] burst_calls; the first from the estimate)
ESTIMATE_STEPS = 3


class StepServer:
    """One contestant in this process: answers Rounds' burst requests as a worker's timing server does (samples of
    the step's time), with its swaps installed around the burst."""

    def __init__(self, step, swaps: list, device: str):
        self.step, self.swaps, self.device = step, swaps, device

    def burst(self, warmup_ms: float, rep_ms: float, timeout_s: float) -> dict:
        with swapping.active(self.swaps):
            timing = incell_measure.time_repeated(self.step, self.device, warmup_ms, rep_ms)
        return {"samples_ms": timing.samples_ms, "timer": timing.timer}


@dataclass
class Timed:
    name: str
    swaps: list
    round_ms: list[float]
    ratios: list[float]  # baseline / this, per round
    interval: stats.Interval | None  # median ratio, bootstrap interval
    timer: str

    @property
    def median_ms(self) -> float:
        return statistics.median(self.round_ms) if self.round_ms else math.nan


def estimate_ms(step, device: str, steps: int = ESTIMATE_STEPS) -> float:
    """The step's time from a few calls (it has run once already): sizes the bursts."""
    samples = []
    for _ in range(steps):
        incell_measure.synchronize(device)
        start = time.perf_counter()
        step()
        incell_measure.synchronize(device)
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def settings_for(step_ms: float, rounds: int, max_rounds: int, round_extra_s: float) -> Settings:
    defaults = Settings()
    return Settings(rounds=rounds, max_rounds=max(max_rounds, rounds), round_extra_s=round_extra_s,
                    burst_ms=max(defaults.burst_ms, BURST_STEPS * step_ms), burst_calls=BURST_STEPS,
                    burst_warmup_ms=max(defaults.burst_warmup_ms, step_ms), min_speedup=MIN_GAIN)


def paired(step, device: str, variants: dict[str, list], settings: Settings, progress=None) -> list[Timed]:
    """Time the unmodified step, its A/A twin and every variant (name -> swaps) in shuffled rounds; one Timed per
    contestant, the baseline first (its ratios are empty) and the twin second."""
    def contestant(name, swaps):
        job = JobSpec(kernel="model", workload=name, dtype="", backend=name, variant="default", timeout_s=600)
        return Contestant(job, StepServer(step, swaps, device), is_twin=name == TWIN)

    base, twin = contestant(BASELINE, []), contestant(TWIN, [])
    others = [contestant(name, swaps) for name, swaps in variants.items()]
    rounds = _ReportedRounds([base, twin, *others], base, settings)
    rounds.progress = progress
    rounds.run()
    out = []
    for c, swaps in [(base, []), (twin, []), *zip(others, variants.values())]:
        ratios = paired_ratios(base, c) if c is not base else []
        out.append(Timed(c.job.backend, swaps, c.round_ms, ratios, stats.median_interval(ratios) if ratios else None,
                         c.timer))
    return out


class _ReportedRounds(Rounds):
    """Rounds that print a line after each round (the model's rounds take seconds each on a GPU)."""

    progress = None

    def _round(self) -> None:
        started = time.perf_counter()
        super()._round()
        if self.progress is not None:
            self.progress(f"round {self.count}: {len(self.contestants)} contestants in "
                          f"{time.perf_counter() - started:.1f} s")


def rel_error(output, reference) -> float:
    """|output - reference| / |reference| over the whole tensor (Frobenius norms, in float64)."""
    diff = (output.double() - reference.double()).norm().item()
    scale = reference.double().norm().item()
    return diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf)


def output_tensor(value):
    """The tensor a step returns (a tensor, or an object with .logits); None when it returns neither."""
    import torch

    if isinstance(value, torch.Tensor):
        return value
    logits = getattr(value, "logits", None)
    return logits if isinstance(logits, torch.Tensor) else None
