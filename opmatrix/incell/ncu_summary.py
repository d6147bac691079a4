"""What Nsight Compute printed, as a row keeps it: the CSV of `ncu --csv --page details` (sections SpeedOfLight,
Occupancy, LaunchStats, WarpStateStats) over the kernels of one call, summed up in a few numbers
(opmatrix.incell.gpu_tools runs ncu; tests/data/gpu_tools_h100/ holds its output recorded on an H100).

The CSV has one line per (kernel launch, metric): `ID` numbers the launch, `Section Name` / `Metric Name` /
`Metric Unit` / `Metric Value` the metric (values with thousands separators, "25,312"), and the lines of a section's
rules (`Rule Name`, `Rule Type`, `Rule Description`) carry no metric. Lines that are not CSV (`==PROF==`,
`==WARNING==`, what the program printed) come before it and are skipped. The summary of one call:

- kernels: how many launches it made; kernel_ms: their durations, summed;
- sm_pct, memory_pct, dram_pct (Compute (SM), Memory and DRAM throughput, % of peak) and occupancy_pct (achieved):
  each launch's, weighted by its duration;
- the longest launch's name, registers per thread, shared memory per block (static + dynamic, the bytes the driver
  reserves left out) and top stall reason. The details page has no table of stall reasons: the WarpStateStats rule
  `CPIStall` names the one that dominates ("each warp ... spends 26.8 cycles being stalled waiting for a scoreboard
  dependency on a L1TEX ... operation. ... This stall type represents about 73.9% of the total ..."), and that is
  what is kept, in ncu's own words, with its share.

Stdlib only.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field

REFUSED = "ERR_NVGPUCTRPERM"  # ncu: this user may not read the GPU's performance counters on this host

# ncu prints values in the unit it names; these scale them to ms and bytes
_TIME_MS = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0, "s": 1e3,
            "second": 1e3}
_BYTES = {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "kib": 1024, "mib": 1024 ** 2, "b": 1, "kb": 1e3, "mb": 1e6}

# the phrase of ncu's CPIStall rule -> the stall reason's name in Nsight Compute's metrics (smsp__pcsamp_warps_issue_
# stalled_*); a phrase not listed is kept as ncu wrote it
STALLS = (
    ("scoreboard dependency on a L1TEX", "long_scoreboard"),
    ("scoreboard dependency on a MIO", "short_scoreboard"),
    ("micro scheduler to select the warp", "not_selected"),
    ("to be selected to fetch an instruction", "no_instruction"),
    ("fixed latency execution dependency", "wait"),
    ("MIO (memory input/output) instruction queue", "mio_throttle"),
    ("L1 instruction queue for local and global", "lg_throttle"),
    ("at a barrier", "barrier"),
    ("at a warp synchronization barrier", "membar"),
    ("memory barrier", "membar"),
    ("execution pipe to be available", "math_pipe_throttle"),
    ("branch target to be computed", "branch_resolving"),
    ("sibling warps", "dispatch_stall"),
    ("immediate constant cache", "imc_miss"),
    ("for a free entry in the tex", "tex_throttle"),
    ("all registers", "drain"),
    ("sleeping", "sleeping"),
)


@dataclass
class Launch:
    """One kernel launch of the profiled call: the metrics of its sections (name -> (value, unit)) and its rules."""

    id: str
    name: str
    metrics: dict[str, tuple[str, str]] = field(default_factory=dict)
    rules: list[tuple[str, str, str]] = field(default_factory=list)  # (rule name, type, description)

    def number(self, metric: str) -> float | None:
        value = self.metrics.get(metric, ("", ""))[0]
        return number(value)

    def duration_ms(self) -> float | None:
        value, unit = self.metrics.get("Duration", ("", ""))
        scale = _TIME_MS.get(unit.strip().lower())
        got = number(value)
        return None if got is None or scale is None else got * scale

    def bytes_of(self, metric: str) -> float | None:
        value, unit = self.metrics.get(metric, ("", ""))
        scale = _BYTES.get(unit.strip().lower().split("/")[0])
        got = number(value)
        return None if got is None or scale is None else got * scale

    def stall(self) -> str:
        """The reason ncu's CPIStall rule names for this launch, "long_scoreboard (73.9% of the cycles between
        issues)"; "" when it names none."""
        for rule, _, text in self.rules:
            if rule != "CPIStall":
                continue
            found = re.search(r"stalled (.*?)\. ", text)
            if not found:
                continue
            words = found.group(1)
            name = next((short for phrase, short in STALLS if phrase in words), words[:80])
            share = re.search(r"represents about ([\d.]+)%", text)
            return name + (f" ({share.group(1)}% of the cycles between issues)" if share else "")
        return ""


@dataclass
class Summary:
    """One call as Nsight Compute saw it (see the module docstring)."""

    kernels: int
    kernel_ms: float | None
    sm_pct: float | None
    memory_pct: float | None
    dram_pct: float | None
    occupancy_pct: float | None
    main_kernel: str
    registers: float | None
    smem_bytes: float | None
    stall: str

    def line(self) -> str:
        """The summary in one line, as a row's `profile` and the report say it."""
        def pct(value):
            return "?" if value is None else f"{value:.0f}%"
        parts = [f"{self.kernels} kernel{'s' if self.kernels != 1 else ''}"]
        if self.kernel_ms is not None:
            parts.append(f"{1e3 * self.kernel_ms:.4g} us")
        parts.append(f"SM {pct(self.sm_pct)}, memory {pct(self.memory_pct)}, DRAM {pct(self.dram_pct)} of peak")
        parts.append(f"occupancy {pct(self.occupancy_pct)}")
        main = f"longest: {self.main_kernel}"
        if self.registers is not None:
            main += f", {self.registers:.0f} registers/thread"
        if self.smem_bytes is not None:
            main += f", {self.smem_bytes:.0f} B shared/block"
        if self.stall:
            main += f", stalled mostly on {self.stall}"
        return "; ".join(parts + [main])

    def fields(self) -> dict:
        """The Result fields (core.result: ncu_*) of this summary."""
        return dict(ncu_kernels=self.kernels, ncu_kernel_ms=self.kernel_ms, ncu_sm_pct=self.sm_pct,
                    ncu_memory_pct=self.memory_pct, ncu_dram_pct=self.dram_pct, ncu_occupancy_pct=self.occupancy_pct,
                    ncu_main_kernel=self.main_kernel, ncu_registers=self.registers, ncu_smem_bytes=self.smem_bytes,
                    ncu_stall=self.stall)


def number(text: str) -> float | None:
    """ncu's "25,312" or "1,956,606,550.25" as a float; None for "" or "n/a"."""
    try:
        return float(text.replace(",", "").strip())
    except (ValueError, AttributeError):
        return None


def launches(text: str) -> list[Launch]:
    """The launches in ncu's CSV output, in the order they ran (the lines before the header are skipped)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        return []
    found: dict[str, Launch] = {}
    for row in csv.DictReader(line for line in lines[start:] if line.startswith('"')):
        launch_id = row.get("ID") or ""
        if not launch_id.isdigit():
            continue
        launch = found.setdefault(launch_id, Launch(launch_id, row.get("Kernel Name") or ""))
        metric = row.get("Metric Name") or ""
        if metric:
            launch.metrics.setdefault(metric, (row.get("Metric Value") or "", row.get("Metric Unit") or ""))
        elif row.get("Rule Name"):
            launch.rules.append((row["Rule Name"], row.get("Rule Type") or "", row.get("Rule Description") or ""))
    return sorted(found.values(), key=lambda launch: int(launch.id))


def summarize(text: str) -> Summary | None:
    """The call's summary from ncu's CSV output; None when it holds no launch."""
    found = launches(text)
    if not found:
        return None
    durations = [launch.duration_ms() for launch in found]
    known = [d for d in durations if d is not None]
    main = max(zip(found, durations), key=lambda pair: pair[1] if pair[1] is not None else -1.0)[0]

    def weighted(metric: str) -> float | None:
        pairs = [(launch.number(metric), d) for launch, d in zip(found, durations)]
        pairs = [(v, d) for v, d in pairs if v is not None and d is not None]
        total = sum(d for _, d in pairs)
        if not pairs:
            return None
        return sum(v * d for v, d in pairs) / total if total > 0 else sum(v for v, _ in pairs) / len(pairs)

    static, dynamic = main.bytes_of("Static Shared Memory Per Block"), main.bytes_of("Dynamic Shared Memory Per Block")
    return Summary(kernels=len(found), kernel_ms=sum(known) if known else None,
                   sm_pct=weighted("Compute (SM) Throughput"), memory_pct=weighted("Memory Throughput"),
                   dram_pct=weighted("DRAM Throughput"), occupancy_pct=weighted("Achieved Occupancy"),
                   main_kernel=short_name(main.name), registers=main.number("Registers Per Thread"),
                   smem_bytes=None if static is None and dynamic is None else (static or 0.0) + (dynamic or 0.0),
                   stall=main.stall())


def short_name(name: str) -> str:
    """A kernel's name without its return type, namespaces, template arguments and parameters:
    'void unnamed>::vectorized_layer_norm_kernel<BFloat16, float, 1>(int, ...)' -> 'vectorized_layer_norm_kernel'."""
    out, depth = [], 0
    # ncu writes an anonymous namespace "unnamed>" (its "<unnamed>" cut short): not a template's bracket
    plain = name.replace("<unnamed>", "unnamed").replace("unnamed>", "unnamed").replace("(anonymous namespace)", "anon")
    for ch in plain:
        if ch in "<(":
            depth += 1
        elif ch in ">)" and depth > 0:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    bare = "".join(out).strip()
    bare = bare.split()[-1] if bare.split() else name
    return (bare.rsplit("::", 1)[-1] or name)[:120]


def refusal(text: str) -> str:
    """Why ncu could not read the counters, in one line, where it said it could not; else ""."""
    if REFUSED in text:
        return (f"not run: this host refuses GPU performance counters to this user ({REFUSED}); allow them "
                "(NVreg_RestrictProfilingToAdminUsers=0, or run as root)")
    return ""


def errors(text: str) -> str:
    """ncu's own ==ERROR== lines, joined into one line (its first 300 characters); "" when there are none."""
    found = [line.partition("==ERROR==")[2].strip() for line in text.splitlines() if "==ERROR==" in line]
    return "; ".join(filter(None, found))[:300]
