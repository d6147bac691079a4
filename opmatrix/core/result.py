"""One result row: the only record type that crosses process, host and storage boundaries.

Serialised in exactly one place (`to_json` / `from_json`). Stdlib only: it is imported inside cell
environments that hold nothing but the kernel's framework.
"""
from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any

from opmatrix.core import status
from opmatrix.core.keys import KEY_FIELDS, JobKey
from opmatrix.core.text import visible_fields

SCHEMA_VERSION = 1


@dataclass
class Result:
    # identity: a result is keyed by (cell, kernel, workload, dtype, backend, variant)
    run_id: str = ""
    cell: str = ""
    device: str = ""
    toolchain: str = ""
    kernel: str = ""
    workload: str = ""
    dtype: str = ""
    backend: str = ""
    variant: str = "default"
    # outcome
    status: str = ""
    error: str = ""
    stderr_tail: str = ""
    phase: str = ""  # where the job was when it ended: load, build, first_call, correctness, timing, done; sanitize
    # for an `unsafe` row (its rounds done, compute-sanitizer found a fault: opmatrix.incell.gpu_tools)
    # environment facts, recorded with every result
    env_hash: str = ""
    host: str = ""
    device_name: str = ""
    vendor: str = ""
    arch: str = ""
    gpu_index: str = ""
    driver: str = ""
    runtime: str = ""
    python: str = ""
    torch: str = ""
    tilelang: str = ""
    triton: str = ""
    backend_version: str = ""
    # workload description
    shape: str = ""
    flops: float | None = None
    min_bytes: float | None = None
    # correctness
    trials: int = 0
    rel_err: float | None = None
    tolerance: float | None = None
    bad_elements: int = 0  # elements outside the element-wise bound in the worst trial (opmatrix.incell.correctness)
    worst_index: str = ""  # where the element furthest outside it is, "(row, col)"; "" when none is
    # build
    compile_s: float | None = None
    compile_cache: str = ""  # "cold": an empty cache folder of this job's own
    config: str = ""  # the kernel's chosen configuration, as JSON text
    # timing
    timer: str = ""  # "cuda-events(triton.do_bench)", "cuda-events", "wallclock", or "" (correctness only)
    median_ms: float | None = None
    p10_ms: float | None = None
    p90_ms: float | None = None
    reps: int = 0
    samples_ms: list[float] = field(default_factory=list)
    tflops: float | None = None
    gbps: float | None = None
    speedup_vs_framework: float | None = None  # derived when a run is consolidated
    rerun_median_ms: float | None = None  # the same build timed again in the same job
    stability_pct: float | None = None  # |rerun - median| / median
    graph_median_ms: float | None = None  # CUDA-graph replay, for rows shorter than [run] cuda_graph_below_ms
    # [run] crosscheck: the same executions timed by events and by CUPTI's kernel records (means per call)
    crosscheck_events_ms: float | None = None
    cupti_ms: float | None = None
    cupti_diff_pct: float | None = None  # (crosscheck_events_ms - cupti_ms) / cupti_ms
    timing_notes: str = ""  # why an optional view (graph replay, CUPTI) is missing
    # [run] profile = "ncu" (opmatrix.incell.gpu_tools): one call profiled by Nsight Compute after the rounds, in a
    # process of its own; what the kernels of that call showed (opmatrix.incell.ncu_summary)
    profile: str = ""  # "ncu: " and the summary in one line, or why there is none ("not run: no GPU in this cell")
    ncu_kernels: int = 0  # kernel launches of one call
    ncu_kernel_ms: float | None = None  # their durations, summed (GPU clocks not locked: --clock-control none)
    ncu_sm_pct: float | None = None  # Compute (SM) throughput, % of peak, weighted by each kernel's duration
    ncu_memory_pct: float | None = None  # Memory throughput (its busiest unit: DRAM, L2, L1), % of peak, likewise
    ncu_dram_pct: float | None = None  # DRAM throughput, % of peak, likewise
    ncu_occupancy_pct: float | None = None  # achieved occupancy, %, likewise
    ncu_main_kernel: str = ""  # the longest kernel's name; the three below are its own
    ncu_registers: float | None = None  # registers per thread
    ncu_smem_bytes: float | None = None  # shared memory per block, static + dynamic
    ncu_stall: str = ""  # its top stall reason (ncu's CPIStall rule) and that reason's share of the cycles
    ncu_report: str = ""  # the full Nsight Compute report (.ncu-rep), relative to the run folder
    # [run] sanitize = true: one call under compute-sanitizer memcheck, racecheck and initcheck, in processes of its
    # own, every tensor its own cudaMalloc (opmatrix.incell.gpu_tools)
    sanitizer: str = ""  # "clean: memcheck 0 errors, ...", "unsafe: ..." (the row is `unsafe`), or why not
    # what the judge (opmatrix.incell.judge) observed: every call got input contents of its own, none seen before
    input_sets: int = 0  # calls the row ran, correctness trials included: as many fresh input sets
    timed_checks: int = 0  # of those, the calls whose outputs the judge compared with their references (all passed)
    catch_p10: float | None = None  # the chance those checks had of seeing wrong outputs on a random tenth of the calls
    judge_s: float | None = None  # the judge's own seconds for this row: its inputs, fills, checks and references
    # CPU: the share (%) of its timed calls' wall time it waited for a core other processes held (a busy machine);
    # taken out of its samples, checked against the kernel's own count
    waited_pct: float | None = None
    idle_cpu_s: float | None = None  # CPU seconds its worker used between its bursts, while others were timed
    # paired, interleaved timing (opmatrix.incell.rounds): every list is aligned by round
    pairing: str = ""  # "interleaved": shuffled rounds with the baseline and its A/A twin; "": timed alone (older)
    rounds: int = 0
    rounds_s: float | None = None  # wall time of those rounds, every contestant's bursts included: their cost
    round_group: str = ""  # rows with the same id were timed in the very same rounds (any two can be paired)
    round_ms: list[float] = field(default_factory=list)  # this row's median burst time in each round
    baseline_round_ms: list[float] = field(default_factory=list)  # the baseline's, in the same rounds
    aa_round_ms: list[float] = field(default_factory=list)  # the baseline's A/A twin's, in the same rounds
    # [run] builds >= 2: this contestant's further builds (own workers), their round medians one build after another,
    # each aligned with round_ms (opmatrix.decide.stats.build_series splits them)
    build_round_ms: list[float] = field(default_factory=list)
    # a [[compare]]'s candidate row: the same backend[variant] under the baseline toolchain, in the same rounds
    peer_toolchain: str = ""
    peer_round_ms: list[float] = field(default_factory=list)
    round_position: list[int] = field(default_factory=list)  # this row's place in each round's shuffled order
    round_sm_mhz: list[float] = field(default_factory=list)  # SM clock after each of its bursts (NVML)
    round_clock_events: list[str] = field(default_factory=list)  # the driver's clock-event reasons after each burst
    # the cores other processes (not this cell's judge and workers) kept busy during each of its rounds (Linux)
    round_others_cores: list[float] = field(default_factory=list)
    # against the device's measured ceilings (opmatrix.incell.ceilings, once per cell)
    ceiling_tflops: float | None = None
    ceiling_gbps: float | None = None
    ceilings_kept: str = ""  # "": measured in this cell; else when (UTC) an earlier cell on this host measured them
    roofline_pct: float | None = None
    # GPU telemetry around the timing (opmatrix.incell.telemetry)
    sm_mhz_start: float | None = None
    sm_mhz_end: float | None = None
    power_w: float | None = None
    temp_c: float | None = None
    clock_events: str = ""
    clock_dropped: bool | None = None
    # bookkeeping
    node: str = ""  # the Ray node that ran the cell
    started_at: str = ""
    duration_s: float | None = None
    schema_version: int = SCHEMA_VERSION
    # processes this job started that outlived it outside its process group (a `setsid` daemon, say): found by the
    # cell runner, a child subreaper, and killed; "pid: command line" each (opmatrix.incell.processes.end_escaped)
    left_running: list[str] = field(default_factory=list)

    def key(self) -> JobKey:
        return JobKey(self.cell, self.kernel, self.workload, self.dtype, self.backend, self.variant)

    def to_json(self) -> str:
        """The row as one JSON line; its texts through core.text.visible (no control character is stored)."""
        return json.dumps(visible_fields(dataclasses.asdict(self)), sort_keys=True, allow_nan=False, default=str)

    @classmethod
    def from_json(cls, text: str) -> Result:
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, data: dict[str, Any], identified: bool = True) -> Result:
        """A row from its JSON object, every field checked (checked_fields): a tampered or damaged row raises
        RowError saying which field is wrong, never becomes a half-blank row or a traceback downstream.
        identified=False: a worker's row, whose identity the cell runner stamps afterwards."""
        return cls(**checked_fields(data, identified))


def checked_fields(data: dict[str, Any], identified: bool = True) -> dict[str, Any]:
    """The fields of a row's JSON object that are Result fields, each checked (RowError says which is wrong), texts
    made visible (a row stored before texts were made safe, or a tampered one); fields it lacks are left out (their
    defaults). What Result.from_dict builds a row from, and what the store reads a whole run with (store.read_jsonl:
    columns, without a Result per row)."""
    if not isinstance(data, dict):
        raise RowError(f"a result row is a JSON object, got {type(data).__name__}")
    for name in REQUIRED if identified else ("status",):
        if not isinstance(data.get(name), str) or not data[name]:
            raise RowError(f"field {name!r} must be a non-empty string, got {data.get(name)!r}")
    if "variant" in data and (not isinstance(data["variant"], str) or not data["variant"]):
        raise RowError(f"field 'variant' must be a non-empty string, got {data['variant']!r}")
    if data["status"] not in status.ALL:
        raise RowError(f"status {data['status']!r} is not one of {', '.join(status.ALL)}")
    # Whether a field that is not a list passes depends on its value's class alone: a row whose classes (field by
    # field, absent ones included) a row before it passed with needs only its lists' elements checked.
    classes = tuple(map(type, map(data.get, _NAMES, _ABSENT)))
    known = _PASSED.get(classes)
    if known is None or not all(_CHECKS[name](data[name]) for name in _LIST_FIELDS if name in data):
        values = _checked_one_by_one(data)
        if len(_PASSED) < 1024:
            _PASSED[classes] = len(values)
    elif len(data) == known:  # no field it does not know
        values = data
    else:
        values = {name: data[name] for name in _NAMES if name in data}
    return visible_fields(values)


def _checked_one_by_one(data: dict[str, Any]) -> dict[str, Any]:
    """The row's Result fields, checked in field order: RowError names the first that is wrong."""
    values = {}
    for name, check in _CHECKS.items():
        if name in data:
            value = data[name]
            if value.__class__ not in _PLAIN[name] and not check(value):  # a value of a plain type passes as it is
                raise RowError(f"field {name!r} has the wrong type: {value!r} ({_TYPES[name]} expected)")
            values[name] = value
    return values


class RowError(ValueError):
    """A stored result row that is not a valid row (wrong type, missing identity, unknown status)."""


def backend_label(backend: str, variant: str) -> str:
    """How a backend and its variant are named in reports and progress: torch, tilelang[cpu]."""
    return backend if variant == "default" else f"{backend}[{variant}]"


def backend_labels(rows) -> list[str]:
    """backend_label of each row of a frame (its backend and variant columns, each read whole: a text column of
    pandas hands out one cell at a time when iterated), in order."""
    return [backend_label(b, v) for b, v in zip(rows.backend.tolist(), rows.variant.tolist())]


_LABEL = re.compile(r"^(?P<backend>[A-Za-z0-9_-]+)(\[(?P<variant>[A-Za-z0-9_-]+)\])?$")


def split_backend_label(label: str) -> tuple[str, str] | None:
    """The reverse of backend_label: 'tilelang[tuned]' -> ('tilelang', 'tuned'), 'torch' -> ('torch', 'default');
    None for text that is not a label."""
    match = _LABEL.match(label.strip())
    return (match["backend"], match["variant"] or "default") if match else None


COLUMNS = [f.name for f in dataclasses.fields(Result)]
# Identity a stored row cannot lack (variant defaults to "default": rows from before variants existed).
REQUIRED = ("run_id", *(k for k in KEY_FIELDS if k != "variant"), "status")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _list_of(plain: set, check):
    """A checker of a list whose elements each pass `check`. Their types are gathered in C first: a list holding
    only `plain` types (what JSON gives) passes without a Python call per element; any other is checked element by
    element."""
    return lambda value: isinstance(value, list) and (set(map(type, value)) <= plain or all(map(check, value)))


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_CHECKERS = {
    "str": lambda v: isinstance(v, str),
    "int": _int,
    "float | None": lambda v: v is None or _number(v),
    "bool | None": lambda v: v is None or isinstance(v, bool),
    "list[float]": _list_of({int, float}, _number),
    "list[str]": _list_of({str}, lambda x: isinstance(x, str)),
    "list[int]": _list_of({int}, _int),
}
_TYPES = {f.name: f.type for f in dataclasses.fields(Result)}
_CHECKS = {name: _CHECKERS[kind] for name, kind in _TYPES.items()}
# the classes a field's check accepts without looking further (a 200,000-row store is read without a call per field)
_PLAIN = {name: {"str": {str}, "int": {int}, "float | None": {float, int, type(None)},
                 "bool | None": {bool, type(None)}}.get(kind, set()) for name, kind in _TYPES.items()}


class _Absent:
    """What an absent field reads as while a row's classes are gathered: a class no value of a row can have."""


_NAMES = tuple(_CHECKS)
_ABSENT = (_Absent(),) * len(_NAMES)
_LIST_FIELDS = tuple(name for name, kind in _TYPES.items() if kind.startswith("list["))
_PASSED: dict[tuple, int] = {}  # the classes of the fields of rows that passed -> how many fields such a row has
NUMERIC = [f.name for f in dataclasses.fields(Result) if f.type == "float | None"]


def clean_float(value: float | None) -> float | None:
    """JSON has no NaN/inf: store them as None (a NaN rel_err is kept as status mismatch + error text)."""
    if value is None:
        return None
    value = float(value)
    return value if value == value and value not in (float("inf"), float("-inf")) else None
