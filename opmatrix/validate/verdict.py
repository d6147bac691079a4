"""The verdict of a swap in the model (one kernel, or all swaps together), from its output check and its paired
end-to-end timing:

- wrong output: the logits' relative error against the unmodified model is over the tolerance; no timing counts.
- confirmed: the end-to-end gain is real, the lower bound of its interval above the noise threshold
  (1 + K_AA x the A/A half-width of the same rounds, as the kernel verdicts' threshold), and not beyond what the
  profile's Amdahl bound predicts: predicted = amdahl(share, micro speed-up), the kernel group's share of the step
  and the kernel's microbenchmark speed-up over the framework (for several swaps, the parts together).
- exceeds Amdahl prediction: the gain's lower bound is above predicted x threshold. The swap changed more than the
  kernel (another code path, a side effect on the rest of the step), or the profile's share or the microbenchmark
  is off: look before trusting either.
- not confirmed: wins alone, not in the model: the microbenchmark showed a win (its interval above 1) but the
  model gains nothing beyond the noise (the adapter's copies, launch or dispatch overhead, another shape, the
  share too small to show: the prediction says which).
- not confirmed: no gain in the model: no real gain, and no microbenchmark win to contradict (missing, or none).
- gain, no prediction: a real gain, but the profile share or the microbenchmark speed-up is missing, so whether
  it is what the kernel promised cannot be said (which is missing is named).
- not applied: the step never called the sites the kernel replaces; does not fit: the adapter refused a call
  (reason); not measured: fewer than 3 rounds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from opmatrix.decide.stats import Interval
from opmatrix.decide.verdicts import K_AA

CONFIRMED = "confirmed"
WINS_ALONE = "not confirmed: wins alone, not in the model"
NO_GAIN = "not confirmed: no gain in the model"
EXCEEDS = "exceeds Amdahl prediction"
NO_PREDICTION = "gain, no prediction"
WRONG = "wrong output"
NOT_APPLIED = "not applied"
DOES_NOT_FIT = "does not fit"
NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class Micro:
    """The kernel's microbenchmark speed-up over the framework, and where it comes from."""
    estimate: float
    lo: float | None
    hi: float | None
    source: str

    def text(self) -> str:
        bounds = f" [{self.lo:.2f}, {self.hi:.2f}]" if self.lo is not None and self.hi is not None else ""
        return f"{self.estimate:.2f}x{bounds} ({self.source})"

    @property
    def wins(self) -> bool:
        """It won alone: its interval lies above 1 (the estimate, where no interval is known)."""
        return (self.lo if self.lo is not None else self.estimate) > 1


@dataclass(frozen=True)
class Part:
    """One swapped kernel's part of the prediction: its group's share of the profiled step and its micro speed-up;
    None where missing (`missing` says why)."""
    kernel: str
    group: str
    share: float | None
    micro: Micro | None
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class Prediction:
    predicted: float | None
    missing: tuple[str, ...] = ()

    def text(self) -> str:
        if self.predicted is None:
            return "no prediction: " + "; ".join(self.missing)
        return f"{self.predicted:.4f}x"


def amdahl_parts(parts: list[tuple[float, float]]) -> float:
    """The whole step's gain when disjoint parts (share s_i, sped up k_i times) all run faster:
    1 / ((1 - sum s_i) + sum s_i / k_i). One part: opmatrix.profile.profiler.amdahl."""
    rest = 1 - sum(s for s, _ in parts) + sum(0.0 if math.isinf(k) else s / k for s, k in parts)
    return math.inf if rest <= 0 else 1 / rest


def predict(parts: list[Part]) -> Prediction:
    missing = tuple(dict.fromkeys(m for p in parts for m in p.missing))
    if missing or any(p.share is None or p.micro is None for p in parts):
        return Prediction(None, missing or ("share or microbenchmark speed-up missing",))
    groups = [p.group for p in parts]
    if len(set(groups)) < len(groups):
        return Prediction(None, (f"two swapped kernels share a profile group ({', '.join(groups)}): their parts "
                                 "of it are not known apart",))
    return Prediction(amdahl_parts([(p.share, p.micro.estimate) for p in parts]))


def threshold(aa: Interval | None) -> float:
    """The smallest gain a verdict may claim: 1 + K_AA x the A/A half-width (1 without a twin interval)."""
    return 1.0 + K_AA * aa.halfwidth if aa is not None else 1.0


@dataclass
class Outcome:
    verdict: str
    reason: str
    notes: list[str] = field(default_factory=list)


def decide(rel_err: float | None, tolerance: float, measured: Interval | None, limit: float,
           prediction: Prediction, micro_wins: bool | None, applied: bool = True, unfit: str = "") -> Outcome:
    """The verdict and its reason for one swap (or all together). `limit`: threshold(A/A interval); micro_wins:
    whether every swapped kernel won alone in its microbenchmark (None: not known)."""
    if unfit:
        return Outcome(DOES_NOT_FIT, unfit)
    if not applied:
        return Outcome(NOT_APPLIED, "the step never called the sites this kernel replaces (see the registry)")
    if rel_err is None or not (rel_err <= tolerance):
        err = "no output tensor to compare" if rel_err is None else f"logits rel error {rel_err:.3g}"
        return Outcome(WRONG, f"{err} > tolerance {tolerance:g} against the unmodified model")
    if measured is None:
        return Outcome(NOT_MEASURED, "fewer than 3 paired rounds")
    gain = f"end to end {measured.text()}, threshold {limit:.4f}"
    predicted = prediction.predicted
    if measured.lo > limit:
        if predicted is None:
            return Outcome(NO_PREDICTION, f"{gain}: a real gain; {prediction.text()}")
        if measured.lo > predicted * limit:
            return Outcome(EXCEEDS, f"{gain}: its lower bound is above the Amdahl prediction {predicted:.4f}x "
                           f"(x threshold {predicted * limit:.4f}): the swap changed more than the kernel, or the "
                           "profile's share or the microbenchmark is off")
        return Outcome(CONFIRMED, f"{gain}: a real gain, within the Amdahl prediction {predicted:.4f}x")
    why = gain + ": no gain beyond the A/A noise"
    if measured.hi < 1 / limit:
        why = gain + ": slower in the model"
    if predicted is not None:
        why += f"; Amdahl predicted {predicted:.4f}x"
        if predicted <= limit:
            why += " (at or below the threshold: these rounds cannot resolve it; more rounds or a larger share)"
    else:
        why += f"; {prediction.text()}"
    return Outcome(WINS_ALONE if micro_wins else NO_GAIN, why)
