"""The Verdicts section: what to ship per (kernel, device, toolchain), and the evidence beside it. First in
report.md and in the terminal; built from opmatrix.decide's verdicts, which read the stored rows only."""
from __future__ import annotations

from opmatrix.report.table import Section

VERDICT_NOTE = ("paired, interleaved timing: every contestant timed in the same shuffled rounds as the baseline "
                "and its A/A twin; speed-ups are medians of per-round ratios with 95% intervals that cover the "
                "variation between rounds and, where the run's A/A twins show one, between worker processes, "
                "geometric mean over the target workloads; the threshold is max(acceptance.min_speedup, 1 + 2 x the "
                "A/A noise floor); `gap`: the framework does not run correctly on that device; the regime: each call "
                "launched on its own with inputs it never saw (on a GPU, L2 flushed before it), so a launch-bound "
                "call's figure includes its launch, as in an eager model step; the performance tables' `graph` is the "
                "same call replayed from a CUDA graph (calls under [run] cuda_graph_below_ms), the regime of a "
                "captured decode step")


def verdict_section(verdicts) -> Section:
    rows = []
    extra = []
    for v in verdicts:
        rows.append([v.kernel, v.device, v.toolchain, v.headline(), v.reason,
                     f"{v.threshold:.3f}" if v.threshold else "", v.aa_floor])
        for c in v.candidates:
            evidence = [f"{c.speedup or 'no interval'}"]
            if c.worst:
                evidence.append(f"worst {c.worst}")
            if not c.correct_everywhere:
                evidence.append(f"not eligible: {c.why_not}")
            if c.compile_s is not None:
                evidence.append(f"compile {c.compile_s:.3g} s")
            if c.tuning_s is not None:
                evidence.append(f"tuning {c.tuning_s:.3g} s")
            if c.lines_of_code is not None:
                evidence.append(f"{c.lines_of_code} lines")
            if c.portability:
                evidence.append("devices: " + ", ".join(f"{d} {s}" for d, s in sorted(c.portability.items())))
            extra.append(f"{v.kernel} on {v.device}.{v.toolchain}: {c.label}: " + "; ".join(evidence))
        extra += [f"{v.kernel} on {v.device}.{v.toolchain}: {o}" for o in v.options]
    return Section("Verdicts", ["kernel", "device", "toolchain", "verdict", "why", "threshold", "A/A noise"], rows,
                   VERDICT_NOTE, extra)
