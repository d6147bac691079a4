"""The sections of the GPU tools a run asked for ([run] profile = "ncu", [run] sanitize = true; the rows' fields
are opmatrix.incell.gpu_tools's): why each contestant is as fast as it is, beside its speed-up, and whether its
call is memory-safe. A row the tool did not run for says why in one line; the tables list those reasons once each,
with how many rows they stand for, so that a CPU cell's rows do not fill a table with "not run"."""
from __future__ import annotations

from opmatrix.core import status
from opmatrix.core.result import backend_label
from opmatrix.decide import stats
from opmatrix.incell.gpu_tools import MEMCHECK_PADDING
from opmatrix.report.performance import speedup_point
from opmatrix.report.table import Section, fmt, key_cells, mixes_toolchains, present, with_toolchain
from opmatrix.store import frame_rows

PROFILE_TITLE = "Profile (Nsight Compute)"
SANITIZER_TITLE = "Sanitizer (compute-sanitizer)"
PROFILE_NOTE = ("[run] profile = \"ncu\": each GPU contestant's call once more after its rounds, in a process of its "
                "own, under Nsight Compute (--clock-control none: the clocks as the rounds had them; sections "
                "SpeedOfLight, Occupancy, LaunchStats, WarpStateStats; caches flushed before each kernel). `kernel "
                "µs` sums the kernels that one call launched, each replayed alone to read its counters: a device "
                "time without launch gaps, not the timed median. SM, memory and DRAM throughput (% of the device's "
                "peak) and achieved occupancy are weighted by each kernel's duration; registers per thread, shared "
                "memory per block and the top stall reason are the longest kernel's. The full report is the "
                "file named in the last column, in the run folder (ncu-ui FILE, or ncu --import FILE --page "
                "details)")
SANITIZER_NOTE = ("[run] sanitize = true: each GPU contestant's call once under compute-sanitizer memcheck, "
                  "racecheck and initcheck, each in a process of its own that builds the implementation again, "
                  "every tensor in a cudaMalloc of its own (PYTORCH_NO_CUDA_MEMORY_CACHING=1: torch's caching "
                  "allocator would put neighbouring tensors in one allocation, where a read past a tensor's end is "
                  "not out of bounds for memcheck; memcheck also puts "
                  f"{MEMCHECK_PADDING // 2 ** 20} MiB of padding after each allocation). initcheck also sees a read "
                  "of memory nothing wrote, wherever it lands. A finding makes the row `unsafe`: never adopted, "
                  "never a supported deployment")


def _asked(df, column: str):
    if column not in df.columns:
        return df.iloc[:0]
    return df[df[column].fillna("") != ""]


def _not_run(rows, column: str, what: str) -> list[str]:
    """One line per reason a tool did not run (or failed), with how many rows and on which devices."""
    lines = []
    for reason, g in rows.groupby(column, sort=True):
        devices = ", ".join(sorted(set(g.device)))
        lines.append(f"{what} {len(g)} row{'s' if len(g) != 1 else ''} ({devices}): {reason}")
    return lines


def _speedup(r) -> str:
    point, lo, hi = speedup_point(r)
    if not present(point):
        return ""
    return stats.interval_text(point, lo, hi) if present(lo) else f"{stats.ratio_text(point)}x"


def profile(df) -> Section:
    """Each profiled row beside its speed-up; the rows the profile did not run for, by reason."""
    asked = _asked(df, "profile")
    done = asked[asked.profile.str.startswith("ncu:")]
    split = mixes_toolchains(done, ["device"])
    rows = []
    for r in frame_rows(done):
        rows.append(key_cells([r.device], r.toolchain, split)
                    + [r.kernel, r.workload, r.dtype, backend_label(r.backend, r.variant), _speedup(r),
                       fmt(r.median_ms, 4), fmt(1e3 * r.ncu_kernel_ms if present(r.ncu_kernel_ms) else None, 4),
                       r.ncu_kernels, _pct(r.ncu_sm_pct), _pct(r.ncu_memory_pct), _pct(r.ncu_dram_pct),
                       _pct(r.ncu_occupancy_pct), r.ncu_main_kernel, fmt(r.ncu_registers),
                       fmt(r.ncu_smem_bytes, 6), r.ncu_stall, r.ncu_report])
    headers = with_toolchain(["device", "kernel", "workload", "dtype", "backend", "speed-up", "median ms",
                              "kernel µs", "kernels", "SM %", "memory %", "DRAM %", "occupancy %", "longest kernel",
                              "registers", "shared B/block", "top stall", "report"], "device", split)
    extra = _not_run(asked.drop(done.index), "profile", "not profiled:")
    return Section(PROFILE_TITLE, headers, rows, PROFILE_NOTE, extra, optional=asked.empty)


def _pct(value) -> str:
    return f"{value:.0f}" if present(value) else ""


def sanitized(df) -> Section:
    """Each sanitized row: clean, or unsafe with its first finding; the rows the tools did not run for, by
    reason."""
    asked = _asked(df, "sanitizer")
    ran = asked[asked.sanitizer.str.startswith(("clean", "unsafe"))]
    split = mixes_toolchains(ran, ["device"])
    rows = [key_cells([r.device], r.toolchain, split)
            + [r.kernel, r.workload, r.dtype, backend_label(r.backend, r.variant), r.status,
               r.sanitizer.partition(": ")[2], _first_line(r.error) if r.status == status.UNSAFE else ""]
            for r in frame_rows(ran)]
    headers = with_toolchain(["device", "kernel", "workload", "dtype", "backend", "status", "found",
                              "first finding"], "device", split)
    unsafe = int((ran.status == status.UNSAFE).sum())
    extra = [f"{unsafe} of {len(ran)} sanitized rows unsafe"] if len(ran) else []
    extra += _not_run(asked.drop(ran.index), "sanitizer", "not sanitized:")
    return Section(SANITIZER_TITLE, headers, rows, SANITIZER_NOTE, extra, optional=asked.empty)


def _first_line(text) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0] if lines else ""
