"""Why a contestant is slow and whether it is safe, on request, after its rounds: its call profiled once by Nsight
Compute (`[run] profile = "ncu"`, `opmatrix run --profile ncu`) and run once under compute-sanitizer's memcheck,
racecheck and initcheck (`[run] sanitize = true`, `--sanitize`).

Neither runs inside the timed rounds, nor in a worker the judge times: the cell runner calls `Tools.apply` on a GPU
contestant's row once the row is made (its worker has ended), and each tool starts a process of its own,
`python -m opmatrix.incell.one_call`, that builds the implementation again and calls it on inputs of the spec, every
tensor in an allocation of its own (one_call says how). What they find goes into the row:

- profile: `profile` (the summary in one line, or why there is none), the `ncu_*` fields
  (opmatrix.incell.ncu_summary) and `ncu_report`, the full Nsight Compute report (.ncu-rep) written into the run
  folder's profiles/ (open it with `ncu-ui`, or `ncu --import FILE --page details`);
- sanitize: `sanitizer` (what each tool found, or why they did not run); a finding makes an `ok` row `unsafe`
  (core.status), phase `sanitize`, its error the first finding (opmatrix.incell.sanitizer).

torch's caching allocator packs tensors into large segments, each one cudaMalloc: a read past a tensor's end then
lands in memory that is allocated, and memcheck says nothing (recorded on an H100: tests/data/gpu_tools_h100/,
a Triton kernel reading 4096 floats past its input, 0 memcheck errors, found by initcheck only). So the sanitized
process runs with PYTORCH_NO_CUDA_MEMORY_CACHING=1 (every tensor its own cudaMalloc), memcheck with `--padding`
(MEMCHECK_PADDING bytes of unallocated memory after every allocation, so that two allocations the driver placed
side by side are not one range either), and initcheck stays: a read of memory nobody wrote (past the end, into
another tensor's bytes that were never written) is its finding whatever the layout.

Where a tool cannot run, the row says why in one line ("not run: no GPU in this cell"), and the run goes on: a CPU
cell, an AMD (ROCm) cell (both tools are NVIDIA's), a tool not found, a host that refuses the performance counters
(ncu's ERR_NVGPUCTRPERM). Stdlib only.
"""
from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
from pathlib import Path
from typing import Callable

from opmatrix.core import status
from opmatrix.core.jobs import DeviceInfo, Settings, WorkerTask
from opmatrix.core.result import Result
from opmatrix.incell import ncu_summary, sanitizer
from opmatrix.incell.processes import run_limited, tail

PROFILE_TOOLS = ("none", "ncu")  # [run] profile
NCU_SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "WarpStateStats")
NCU_ARGS = ("--clock-control", "none", "--profile-from-start", "off", "--csv", "--page", "details",
            *(a for s in NCU_SECTIONS for a in ("--section", s)))
SANITIZER_TOOLS = sanitizer.TOOLS  # memcheck, racecheck, initcheck, in this order
MEMCHECK_PADDING = 1 << 20  # bytes of padding memcheck puts after every allocation
FOUND_EXIT = 86  # compute-sanitizer's exit code when it found something (--error-exitcode)
NO_CACHING = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}  # the sanitized process: every tensor its own cudaMalloc
PROFILES = "profiles"  # the run folder's folder of .ncu-rep files
CUDA_BIN = "/usr/local/cuda/bin"  # where a tool is looked for after PATH and $CUDA_HOME/bin


def find_tool(name: str, env: dict) -> str | None:
    """The tool's path: on the environment's PATH, else in $CUDA_HOME/bin or /usr/local/cuda/bin."""
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found:
        return found
    folders = ([Path(env["CUDA_HOME"]) / "bin"] if env.get("CUDA_HOME") else []) + [Path(CUDA_BIN)]
    return next((str(f / name) for f in folders if os.access(f / name, os.X_OK)), None)


def why_not(device: DeviceInfo, tool: str, env: dict) -> str:
    """Why `tool` (ncu, compute-sanitizer) cannot run on this cell's device, in one line; "" when it can."""
    if not device.is_gpu:
        return "not run: no GPU in this cell (a CPU cell)"
    if device.vendor != "nvidia":
        return f"not run: {tool} is NVIDIA's and this cell's device is {device.vendor} (ROCm): no counterpart is wired"
    if find_tool(tool, env) is None:
        return f"not run: {tool} is not on PATH (nor in $CUDA_HOME/bin or {CUDA_BIN})"
    return ""


def _one_line(text: str, most: int = 300) -> str:
    return " ".join(text.split())[:most]


class Tools:
    """The tools a run asked for, for the GPU contestants of one cell."""

    def __init__(self, settings: Settings, device: DeviceInfo, profiles: Path,
                 on_now: Callable[[str], None] | None = None) -> None:
        self.profile = settings.profile if settings.profile in PROFILE_TOOLS[1:] else ""
        self.sanitize = bool(settings.sanitize)
        self.device, self.profiles = device, Path(profiles)
        self.on_now = on_now or (lambda text: None)

    @property
    def asked(self) -> bool:
        return bool(self.profile or self.sanitize)

    def apply(self, row: Result, task: WorkerTask, folder: Path, python: str, env: dict, name: str) -> Result:
        """The row with what the tools asked for found (an `ok` row only; `name`: the job's folder name, which the
        report file is named after)."""
        if row.status != status.OK or not self.asked:
            return row
        what = f"{task.job.kernel} {task.job.workload} {task.job.dtype} {row.backend}"
        if self.profile:
            self.on_now(f"{what}: one call under Nsight Compute")
            row = self._profiled(row, task, folder, python, env, name)
        if self.sanitize:
            self.on_now(f"{what}: one call under compute-sanitizer ({', '.join(SANITIZER_TOOLS)})")
            row = self._sanitized(row, task, folder, python, env)
        return row

    # -- Nsight Compute ---------------------------------------------------------------------------------------------

    def _profiled(self, row: Result, task: WorkerTask, folder: Path, python: str, env: dict, name: str) -> Result:
        reason = why_not(self.device, "ncu", env)
        if reason:
            return dataclasses.replace(row, profile=reason)
        ncu = find_tool("ncu", env)
        self.profiles.mkdir(parents=True, exist_ok=True)
        report = self.profiles / name  # ncu adds .ncu-rep
        request, done = _request(folder, "profile", task)
        log = folder / "ncu.log"
        code, _ = run_limited([ncu, *NCU_ARGS, "-o", str(report), "-f", python, "-m", "opmatrix.incell.one_call",
                               str(request)], env, log, task.job.timeout_s)
        text = tail(log, 4_000_000)
        kept = report.with_name(report.name + ".ncu-rep")
        summary = ncu_summary.summarize(text)
        if summary is None and kept.is_file():  # ncu wrote the report and printed nothing: read it back
            imported = folder / "ncu-import.log"
            run_limited([ncu, "--import", str(kept), "--csv", "--page", "details"], env, imported, 120)
            summary = ncu_summary.summarize(tail(imported, 4_000_000))
        refused = ncu_summary.refusal(text)
        if refused:
            return dataclasses.replace(row, profile=refused)
        if code is None:
            return dataclasses.replace(row, profile=f"failed: ncu did not finish in {task.job.timeout_s:g} s")
        if summary is None:
            said = ncu_summary.errors(text) or _one_line(text[-300:])
            called = "the call completed" if done.is_file() else f"the call did not complete (exit code {code})"
            return dataclasses.replace(row, profile=f"failed: ncu profiled no kernel; {called}: {said}"[:400])
        where = self._shown(kept) if kept.is_file() else ""
        return dataclasses.replace(row, profile="ncu: " + summary.line(), ncu_report=where, **summary.fields())

    def _shown(self, path: Path) -> str:
        """The report's path as a row names it: relative to the run folder (profiles/NAME.ncu-rep) where it is there."""
        run_folder = self.profiles.parent
        return str(path.relative_to(run_folder)) if path.is_relative_to(run_folder) else str(path)

    # -- compute-sanitizer ------------------------------------------------------------------------------------------

    def _sanitized(self, row: Result, task: WorkerTask, folder: Path, python: str, env: dict) -> Result:
        reason = why_not(self.device, "compute-sanitizer", env)
        if reason:
            return dataclasses.replace(row, sanitizer=reason)
        tool_path = find_tool("compute-sanitizer", env)
        outcomes, failures = [], []
        for tool in SANITIZER_TOOLS:
            request, done = _request(folder, f"sanitize-{tool}", task)
            log = folder / f"sanitizer-{tool}.log"
            extra = ["--padding", str(MEMCHECK_PADDING), "--report-api-errors", "no"] if tool == "memcheck" else []
            code, _ = run_limited([tool_path, "--tool", tool, "--print-limit", "10", "--error-exitcode",
                                   str(FOUND_EXIT), *extra, python, "-m", "opmatrix.incell.one_call", str(request)],
                                  dict(env, **NO_CACHING), log, task.job.timeout_s)
            outcome = sanitizer.parse(tail(log, 4_000_000), tool)
            outcomes.append(outcome)
            if outcome.found:
                continue
            if code is None:
                failures.append(f"{tool} did not finish in {task.job.timeout_s:g} s")
            elif not outcome.finished or not done.is_file():
                said = _one_line(tail(log, 600))
                failures.append(f"{tool}: the call did not complete (exit code {code}): {said}")
        said = "; ".join(o.said() for o in outcomes)
        found = [o for o in outcomes if o.found]
        if found:
            first = found[0]
            error = (f"compute-sanitizer {first.tool} found {first.said().split(' ', 1)[1]} in one call (every tensor "
                     f"its own cudaMalloc); the first: {first.first or 'not printed'}")
            return dataclasses.replace(row, status=status.UNSAFE, phase="sanitize", error=error,
                                       sanitizer=f"unsafe: {said}")
        if failures:
            return dataclasses.replace(row, sanitizer=_one_line("failed: " + "; ".join(failures), 400))
        return dataclasses.replace(row, sanitizer=f"clean: {said}")


def _request(folder: Path, purpose: str, task: WorkerTask) -> tuple[Path, Path]:
    """one_call's request file for `purpose` (profile, sanitize-<tool>) and the file it writes once the call has
    returned (removed first)."""
    done = folder / f"{purpose}.done"
    done.unlink(missing_ok=True)
    request = folder / f"{purpose}.json"
    request.write_text(json.dumps({"task": json.loads(task.to_json()), "purpose": purpose.split("-")[0],
                                   "seed": random.SystemRandom().getrandbits(62), "done": str(done)}))
    return request, done
