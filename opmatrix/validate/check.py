"""Validate one model step: the output of every swap checked against the unmodified model, the correct ones timed
paired and interleaved with it (opmatrix.validate.measure), and each given its verdict (opmatrix.validate.verdict)
from the measured gain, the A/A noise floor and the Amdahl prediction of the profile's share and the kernel's
microbenchmark speed-up.

Variants: each swap alone, and all swaps together when there are several. The output check runs the unmodified
step twice (its run-to-run difference is reported beside the tolerance) and each variant once, which also builds
(compiles) every implementation before anything is timed.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from opmatrix.validate import measure, verdict
from opmatrix.validate.swap import Swap, active, dtype_name

TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 5e-2}  # logits rel error against the framework model
# fp32: the model's own ops reordered by a kernel (fp32 accumulation either way) stay near 1e-6 on the tiny
# config; a wrong formula is off by O(0.1-1). bf16/fp16: a kernel that rounds once where the eager code rounds
# after every op moves every layer's activations by a few units of roundoff (2^-8 bf16), compounded over the layers
# and the final projection: percent-level in bf16 logits, still an order of magnitude under a wrong kernel.


@dataclass
class Checked:
    name: str  # "rope=triton", or measure.ALL
    swaps: list[Swap]
    rel_err: float | None = None
    applied: bool = True
    unfit: str = ""


@dataclass
class Row:
    """One variant's evidence and verdict, as validate.json stores it."""
    variant: str
    kernels: list[str]
    replaces: list[str]
    rel_err: float | None
    tolerance: float
    median_ms: float | None
    gain: float | None
    gain_lo: float | None
    gain_hi: float | None
    rounds: int
    parts: list[dict]
    predicted: float | None
    prediction: str
    verdict: str
    reason: str
    workloads: dict[str, list] = field(default_factory=dict)


def check_outputs(step, swaps: list[Swap], progress) -> tuple[float | None, list[Checked], str]:
    """(run-to-run rel error of the unmodified step, one Checked per variant, the output's dtype)."""
    reference = _output(step)
    if reference is None:
        why = "the step returns no tensor (nor an object with .logits): its output cannot be checked"
        return None, [Checked(s.label, [s], None, unfit=why) for s in swaps], ""
    again = _output(step)
    floor = measure.rel_error(again, reference)
    checked = []
    for s in swaps:
        progress(f"output check: {s.label} (builds it on first use)")
        checked.append(_check(step, s.label, [s], reference))
    if len(swaps) > 1:
        fit = [c for c in checked if not c.unfit and c.applied]
        if len(fit) == len(swaps):
            progress(f"output check: {measure.ALL}")
            checked.append(_check(step, measure.ALL, swaps, reference))
    return floor, checked, dtype_name(reference.dtype)


def _output(step):
    value = measure.output_tensor(step())
    return None if value is None else value.detach().clone()


def _check(step, name: str, swaps: list[Swap], reference) -> Checked:
    from opmatrix.incell.plugins import Unsupported
    from opmatrix.sites.adapters import Unfit

    calls = [s.kernel.calls for s in swaps]
    c = Checked(name, swaps)
    try:
        with active(swaps):
            output = _output(step)
    except (Unfit, Unsupported) as exc:
        c.unfit = f"{type(exc).__name__}: {exc}"
        return c
    except Exception as exc:  # the implementation failed inside the model: a fact of this swap, not of validate
        c.unfit = f"failed in the model: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        return c
    c.applied = all(s.kernel.calls > n for s, n in zip(swaps, calls))
    c.rel_err = measure.rel_error(output, reference) if output is not None else None
    return c


def run(step, device: str, swaps: list[Swap], rounds: int, max_rounds: int, tolerance: float | None, progress,
        round_extra_s: float = 120.0) -> dict:
    """Check every variant's output, then time the correct ones: the bursts sized from the step's own time
    (measured after the check, so every implementation is built). The measurements, for decide_rows."""
    floor, checked, dtype = check_outputs(step, swaps, progress)
    step_ms = measure.estimate_ms(step, device)
    settings = measure.settings_for(step_ms, rounds, max_rounds, round_extra_s)
    tol = tolerance if tolerance is not None else TOLERANCE.get(dtype, TOLERANCE["float32"])
    timed = [c for c in checked if not c.unfit and c.applied and c.rel_err is not None and c.rel_err <= tol]
    progress(f"step {step_ms:.2f} ms; timing {len(timed)} variant(s) against the unmodified step and its A/A twin "
             f"in {settings.rounds}+ shuffled rounds (bursts of {settings.burst_ms:.0f} ms)")
    timings = measure.paired(step, device, {c.name: c.swaps for c in timed}, settings, progress)
    return {"floor": floor, "checked": checked, "dtype": dtype, "tolerance": tol, "step_ms": step_ms,
            "timings": timings}


def decide_rows(measured: dict, parts_of, micro_wins_of) -> tuple[list[Row], dict]:
    """A Row per checked variant. parts_of(swaps) -> [verdict.Part]; micro_wins_of(swaps) -> bool | None."""
    timings = {t.name: t for t in measured["timings"]}
    base, twin = timings[measure.BASELINE], timings[measure.TWIN]
    limit = verdict.threshold(twin.interval)
    rows = []
    for c in measured["checked"]:
        t = timings.get(c.name)
        parts = parts_of(c.swaps)
        prediction = verdict.predict(parts)
        outcome = verdict.decide(c.rel_err, measured["tolerance"], t.interval if t else None, limit, prediction,
                                 micro_wins_of(c.swaps), c.applied, c.unfit)
        interval = t.interval if t else None
        rows.append(Row(c.name, [s.label for s in c.swaps], [site.replaces for s in c.swaps for site in s.sites],
                        c.rel_err, measured["tolerance"], t.median_ms if t else None,
                        *(interval.estimate, interval.lo, interval.hi) if interval else (None, None, None),
                        len(t.ratios) if t else 0, [_part(p) for p in parts], prediction.predicted, prediction.text(),
                        outcome.verdict, outcome.reason,
                        {s.kernel.choice.kernel: s.kernel.workloads for s in c.swaps}))
    noise = {"baseline_ms": base.median_ms, "rounds": len(base.round_ms), "timer": base.timer,
             "aa": asdict(twin.interval) if twin.interval else None, "threshold": limit,
             "aa_text": twin.interval.text() if twin.interval else "no A/A interval",
             "run_to_run_rel_err": measured["floor"]}
    return rows, noise


def _part(p: verdict.Part) -> dict:
    return {"kernel": p.kernel, "group": p.group, "share": p.share,
            "micro": p.micro.text() if p.micro else None, "micro_speedup": p.micro.estimate if p.micro else None,
            "missing": list(p.missing)}
