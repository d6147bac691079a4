"""Profile one model step with torch.profiler and say which kernel groups are worth a custom kernel.

- Measure: the step runs `warmup` times, then `steps` times under torch.profiler (CPU activity always, CUDA activity
  on a GPU), each step inside an `opmatrix::step` range, with the labelled ranges of ops.labelled_ranges() open.
- Time: on a GPU, the device time of every kernel, memcpy and memset (each goes to the op that launched it); on
  the CPU, the self CPU time of every op. Labelled ranges are no ops: host time outside any op (Python, the hooks)
  is in the wall time only. The step time is the sum of those times; `busy` is its share of the wall time.
- Group: ops.classify files each time under one kernel group; a group's share s is its time over the step time, so
  the shares sum to 1.
- Amdahl: the whole step's gain if the group ran k times faster is 1 / ((1 - s) + s / k), for k = 1.1, 1.5, 2 and
  infinity (the ceiling: the group takes no time at all). A kernel group under the threshold share (5 %) is not
  worth a custom kernel: even an infinitely fast one gains at most 1 / (1 - s).
- Cross-check: the top ops' times and the step time against torch.profiler's own key_averages() of the same
  profile; they agree when every relative difference is within CROSS_CHECK_TOLERANCE.
Gains are relative to the step time (busy time); where the wall time has idle or host time beside it (busy < 1),
the wall-clock gain is smaller.
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field

from opmatrix import paths
from opmatrix.incell import plugins
from opmatrix.profile import ops

SPEEDUPS = (1.1, 1.5, 2.0, math.inf)
DEFAULT_STEPS = 5
DEFAULT_WARMUP = 2
DEFAULT_THRESHOLD = 0.05
CROSS_CHECK_TOLERANCE = 0.01  # relative
CROSS_CHECK_OPS = 5  # the top ops compared one by one
TOP_OPS_PER_GROUP = 3
TOP_OPS = 15

WORTH, NOT_WORTH, NO_SINGLE_KERNEL = ("worth a custom kernel", "not worth a custom kernel",
                                      "above threshold, no single kernel: fuse its top ops")
UNLAUNCHED = "(device work launched by no op)"


@dataclass(frozen=True)
class Slice:
    """One measured piece of time: an op's self CPU time, or a kernel's device time."""
    name: str  # as key_averages names it: the op (CPU), the kernel (GPU)
    op: str  # the CPU op it belongs to (on a GPU, the one that launched the kernel)
    group: str
    us: float


@dataclass
class RawOp:
    name: str
    group: str
    us_per_step: float
    share: float
    calls: float  # per step
    launched_by: list[str] = field(default_factory=list)  # GPU: the ops that launched this kernel


@dataclass
class GroupRow:
    group: str
    description: str
    us_per_step: float
    share: float
    gains: dict[str, float | None]  # "1.1x" ... "inf" -> whole-step gain; None: unbounded
    verdict: str
    in_opmatrix: bool  # kernels/<group> exists
    top_ops: list[RawOp]


@dataclass
class CrossCheck:
    tolerance: float
    max_rel_diff: float
    agrees: bool
    compared: list[dict]  # {"name", "ours_us", "key_averages_us", "rel_diff"}; the step time is "(step total)"

    def line(self) -> str:
        what = f"{len(self.compared) - 1} top ops and the step time"
        if self.agrees:
            return f"agrees with key_averages within {100 * self.max_rel_diff:.3g} % ({what})"
        return (f"DISAGREES with key_averages by up to {100 * self.max_rel_diff:.3g} % (tolerance "
                f"{100 * self.tolerance:.3g} %; {what})")


@dataclass
class Profile:
    target: str
    description: str
    device: str
    basis: str  # "self device time" / "self CPU time"
    steps: int
    us_per_step: float  # the step time: the sum of the groups
    wall_us_per_step: float
    threshold: float
    groups: list[GroupRow]
    top_ops: list[RawOp]
    cross_check: CrossCheck
    torch_version: str

    @property
    def busy(self) -> float:
        return self.us_per_step / self.wall_us_per_step if self.wall_us_per_step else math.nan


def amdahl(share: float, speedup: float) -> float:
    """The whole step's gain when a part taking `share` of it runs `speedup` times faster."""
    rest = (1 - share) + (0.0 if math.isinf(speedup) else share / speedup)
    return math.inf if rest <= 0 else 1 / rest


def speedup_label(speedup: float) -> str:
    return "inf" if math.isinf(speedup) else f"{speedup:g}x"


def gains(share: float) -> dict[str, float | None]:
    """Amdahl gains at every SPEEDUPS; None where the gain is unbounded (the group is the whole step)."""
    values = {speedup_label(k): amdahl(share, k) for k in SPEEDUPS}
    return {k: (None if math.isinf(v) else v) for k, v in values.items()}


def verdict(group: str, share: float, threshold: float) -> str:
    if share < threshold:
        return NOT_WORTH
    return WORTH if group in ops.KERNEL_GROUPS else NO_SINGLE_KERNEL


def record(step, device: str, steps: int = DEFAULT_STEPS, warmup: int = DEFAULT_WARMUP):
    """Run the step `warmup` times, then `steps` times under torch.profiler; the profiler, stopped."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    on_gpu = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with ops.labelled_ranges():
        for _ in range(warmup):
            step()
        _synchronize(torch, on_gpu)
        with profile(activities=activities) as prof:
            for _ in range(steps):
                with record_function(ops.STEP_RANGE):
                    step()
                    _synchronize(torch, on_gpu)
    return prof


def _synchronize(torch, on_gpu: bool) -> None:
    if on_gpu:
        torch.cuda.synchronize()


def _is_cpu(event) -> bool:
    from torch.autograd import DeviceType

    return event.device_type == DeviceType.CPU


def _is_annotation(event) -> bool:
    return bool(getattr(event, "is_user_annotation", False))


def cpu_slices(events) -> list[Slice]:
    """Every op's self CPU time (labelled ranges and other annotations are no ops)."""
    return [Slice(e.name, e.name, ops.classify(e), float(e.self_cpu_time_total)) for e in events
            if _is_cpu(e) and not e.is_async and not _is_annotation(e)]


def device_slices(events) -> list[Slice]:
    """Every kernel's (memcpy's, memset's) device time, attributed to the CPU event that launched it; device work
    whose launch the profiler could not link to an event is kept as UNLAUNCHED, grouped by its kernel name."""
    slices = [Slice(k.name, e.name, ops.classify_kernel(k.name, e), float(k.duration))
              for e in events if _is_cpu(e) and not e.is_async for k in e.kernels]
    linked = defaultdict(float)
    for s in slices:
        linked[s.name] += s.us
    for name, us in _device_time_by_name(events).items():
        if us - linked.get(name, 0.0) > 1e-6 * max(us, 1.0):
            slices.append(Slice(name, UNLAUNCHED, ops.classify_kernel(name, None), us - linked.get(name, 0.0)))
    return slices


def _device_time_by_name(events) -> dict[str, float]:
    totals = defaultdict(float)
    for e in events:
        if not _is_cpu(e) and not _is_annotation(e):
            totals[e.name] += float(e.self_device_time_total)
    return totals


def wall_us_per_step(events) -> float:
    """The mean wall time of the `opmatrix::step` ranges (each ends after the device is synchronised)."""
    walls = [float(e.cpu_time_total) for e in events if _is_cpu(e) and e.name == ops.STEP_RANGE]
    return sum(walls) / len(walls) if walls else math.nan


def raw_ops(slices: list[Slice], total_us: float, steps: int, by_group: bool) -> list[RawOp]:
    """Slices summed per name (and per group when by_group), largest first."""
    time, calls, launchers = defaultdict(float), defaultdict(int), defaultdict(lambda: defaultdict(float))
    for s in slices:
        key = (s.name, s.group if by_group else "")
        time[key] += s.us
        calls[key] += 1
        if s.op != s.name:
            launchers[key][s.op] += s.us
    rows = [RawOp(name, group or _main_group(slices, name), us / steps, us / total_us if total_us else 0.0,
                  calls[(name, group)] / steps,
                  sorted(launchers[(name, group)], key=launchers[(name, group)].get, reverse=True)[:3])
            for (name, group), us in time.items()]
    return sorted(rows, key=lambda r: r.us_per_step, reverse=True)


def _main_group(slices: list[Slice], name: str) -> str:
    """The group holding most of a raw op's time (one op name can serve several groups: aten::mul)."""
    per_group = defaultdict(float)
    for s in slices:
        if s.name == name:
            per_group[s.group] += s.us
    return max(per_group, key=per_group.get)


def group_rows(slices: list[Slice], total_us: float, steps: int, threshold: float) -> list[GroupRow]:
    """One row per group that has time, largest share first."""
    by_group = defaultdict(list)
    for op in raw_ops(slices, total_us, steps, by_group=True):
        by_group[op.group].append(op)
    rows = []
    kernels = set(plugins.discover(paths.BUILTIN_KERNELS, paths.BUILTIN_BACKENDS, paths.KERNELS).kernels())
    for group, members in by_group.items():
        share = sum(m.share for m in members)
        rows.append(GroupRow(group, ops.GROUPS[group], sum(m.us_per_step for m in members), share, gains(share),
                             verdict(group, share, threshold), group in kernels,  # shipped, installed or the project's
                             members[:TOP_OPS_PER_GROUP]))
    return sorted(rows, key=lambda r: r.share, reverse=True)


def key_averages_times(prof, on_gpu: bool) -> dict[str, float]:
    """torch.profiler's own per-name self time: self device time of the device events on a GPU, self CPU time of
    the CPU ops on the CPU (annotations left out, as its table's totals do)."""
    times = {}
    for avg in prof.key_averages():
        if _is_annotation(avg) or _is_cpu(avg) == on_gpu:
            continue
        times[avg.key] = float(avg.self_device_time_total if on_gpu else avg.self_cpu_time_total)
    return times


def cross_check(slices: list[Slice], reference: dict[str, float], tolerance: float = CROSS_CHECK_TOLERANCE,
                top: int = CROSS_CHECK_OPS) -> CrossCheck:
    """Our per-name times and total against key_averages' (`reference`): the top ops one by one, then the sum."""
    ours = defaultdict(float)
    for s in slices:
        ours[s.name] += s.us
    names = sorted(ours, key=ours.get, reverse=True)[:top]
    pairs = [(n, ours[n], reference.get(n, 0.0)) for n in names]
    pairs.append(("(step total)", sum(ours.values()), sum(reference.values())))
    compared = [{"name": n, "ours_us": a, "key_averages_us": b, "rel_diff": abs(a - b) / max(abs(b), 1e-9)}
                for n, a, b in pairs]
    worst = max(c["rel_diff"] for c in compared)
    return CrossCheck(tolerance, worst, worst <= tolerance, compared)


def summarise(prof, device: str, steps: int, threshold: float = DEFAULT_THRESHOLD, target: str = "",
              description: str = "") -> Profile:
    """The profile of a stopped profiler: groups, Amdahl gains, top ops, cross-check."""
    import torch

    on_gpu = device.startswith("cuda")
    events = prof.events()
    slices = device_slices(events) if on_gpu else cpu_slices(events)
    total = sum(s.us for s in slices)
    return Profile(target=target, description=description, device=_device_name(torch, device),
                   basis="self device time" if on_gpu else "self CPU time", steps=steps, us_per_step=total / steps,
                   wall_us_per_step=wall_us_per_step(events), threshold=threshold,
                   groups=group_rows(slices, total, steps, threshold),
                   top_ops=raw_ops(slices, total, steps, by_group=False)[:TOP_OPS],
                   cross_check=cross_check(slices, key_averages_times(prof, on_gpu)),
                   torch_version=torch.__version__)


def _device_name(torch, device: str) -> str:
    if device.startswith("cuda"):
        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return "cpu"


def profile_step(step, device: str, steps: int = DEFAULT_STEPS, threshold: float = DEFAULT_THRESHOLD,
                 trace_path=None, target: str = "", description: str = "",
                 warmup: int = DEFAULT_WARMUP) -> Profile:
    """Record the step, write the Chrome trace to trace_path (if given), and summarise."""
    prof = record(step, device, steps, warmup)
    if trace_path is not None:
        prof.export_chrome_trace(str(trace_path))
    return summarise(prof, device, steps, threshold, target, description)


# --- rendering: one table for profile.md and the terminal ---------------------------------------------------------

HEADERS = ("kernel group", "share", "ms / step", *(f"gain at {speedup_label(k)}" for k in SPEEDUPS), "worth it?",
           "kernel", "top raw ops")


def _gain_text(value: float | None) -> str:
    return "unbounded" if value is None else f"{value:.3f}x"


def _op_text(op: RawOp, width: int = 60) -> str:
    name = op.name if len(op.name) <= width else op.name[:width - 1] + "…"
    return f"{name} {100 * op.share:.1f}%"


def table_rows(profile: Profile) -> list[list[str]]:
    return [[g.group, f"{100 * g.share:.1f}%", f"{g.us_per_step / 1e3:.3f}", *map(_gain_text, g.gains.values()),
             g.verdict, f"kernels/{g.group}" if g.in_opmatrix else ("to add" if g.group in ops.KERNEL_GROUPS else "-"),
             "; ".join(_op_text(o) for o in g.top_ops)] for g in profile.groups]


def summary_lines(profile: Profile) -> list[str]:
    busy = f"{100 * profile.busy:.0f} %" if not math.isnan(profile.busy) else "n/a"
    return [f"target: {profile.target}: {profile.description}",
            f"device: {profile.device}; torch {profile.torch_version}; {profile.steps} profiled steps",
            f"step time ({profile.basis}): {profile.us_per_step / 1e3:.3f} ms; wall time "
            f"{profile.wall_us_per_step / 1e3:.3f} ms per step (busy {busy})",
            f"cross-check: {profile.cross_check.line()}",
            f"threshold: a kernel group under {100 * profile.threshold:g} % of the step is {NOT_WORTH}"]


def markdown(profile: Profile) -> str:
    from opmatrix.report.markdown import row

    lines = [f"# Profile of {profile.target}", ""] + [f"- {line}" for line in summary_lines(profile)]
    lines += ["", "## Kernel groups", "", "Whole-step gain if the group ran k times faster (Amdahl: "
              "1 / ((1 - s) + s / k)); the shares sum to 1.", "", row(HEADERS),
              row(["---"] * len(HEADERS))]
    lines += [row(cells) for cells in table_rows(profile)]
    lines += ["", "## Top raw ops", ""] + _top_ops_table(profile.top_ops)
    lines += ["", "## Cross-check against torch.profiler key_averages()", "",
              row(("name", "ours (µs)", "key_averages (µs)", "difference")), row(["---"] * 4)]
    lines += [row((c["name"], f"{c['ours_us']:.1f}", f"{c['key_averages_us']:.1f}", f"{100 * c['rel_diff']:.3g}%"))
              for c in profile.cross_check.compared]
    lines += ["", "Groups: " + "; ".join(f"{g}: {d}" for g, d in ops.GROUPS.items()) + "."]
    return "\n".join(lines) + "\n"


def _top_ops_table(top_ops: list[RawOp]) -> list[str]:
    """The top raw ops; on a GPU (kernels) with the ops that launched them."""
    from opmatrix.report.markdown import row

    launched = any(o.launched_by for o in top_ops)
    headers = ("op", "group", "share", "ms / step", "calls / step") + (("launched by",) if launched else ())
    rows = [(o.name, o.group, f"{100 * o.share:.1f}%", f"{o.us_per_step / 1e3:.3f}", f"{o.calls:g}")
            + ((", ".join(o.launched_by),) if launched else ()) for o in top_ops]
    return [row(headers), row(["---"] * len(headers))] + [row(r) for r in rows]


def to_dict(profile: Profile) -> dict:
    data = asdict(profile)
    data["busy"] = profile.busy
    data["cross_check"]["line"] = profile.cross_check.line()
    return finite(data)


def finite(value):
    """JSON has no NaN or infinity: None in their place (also for validate's report)."""
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return None if isinstance(value, float) and not math.isfinite(value) else value


def to_json(profile: Profile) -> str:
    return json.dumps(to_dict(profile), indent=1, allow_nan=False)
