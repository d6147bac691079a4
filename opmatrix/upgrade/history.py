"""The nightly history: every stored run's rows, one Parquet file per run under reports/history/, and what they
say over the nights: where each series shifts, what changed in the toolchain that night, and the versions under
which a backend was known good.

**Store.** `append_run` writes `<run_id>.parquet` through a temporary file and `os.replace`: appending is never a
rewrite, two nightly jobs never write the same file, and appending a run again replaces its file. A row keeps its
key (device, kernel, workload, dtype, backend, variant, toolchain), the night (the run's start time from run.json),
the toolchain fingerprint (a short hash and the text of the versions the cell imported: Python, torch, Triton,
TileLang, driver, runtime), status, median_ms, the paired speed-up against the framework with its interval (runs
timed in rounds; opmatrix.decide.stats), rel_err, compile_s and run_id. Nothing else is kept: the run folder stays
the evidence.

**Change points.** ruptures' PELT search with the l2 cost, `KernelCPD(kernel="linear")` (the same segmentation as
`Pelt(model="l2", jump=1)`, measured identical on 300 series, but in C and about 600x faster), on log(value): a
shift is relative, so 10 % slower is the same step for a 10 µs and a 10 ms kernel. One penalty fits every series
because the series is first divided by its own noise: σ from the median absolute deviation of successive
differences (a step moves only one of them), a first segmentation at half the penalty, then σ pooled within its
segments (the spread left once each level is taken out; sharper than the MAD with few nights) and the final
segmentation at PENALTY (in units of σ²), with σ never below NOISE_FLOOR. A shift needs MIN_NIGHTS = 2 nights on
its new level: one odd night is an outlier, not a shift, and tonight's regression is named tomorrow.
PENALTY = 29 was calibrated on log-normal noise of 2 % sd (the scaling makes it hold for any sd above the floor;
tests/unit/test_history.py re-measures it; here 10 000 pure-noise series per length, 4 000 per planted step):
- false alarms, the share of pure-noise series with any change point: 0.6 % at 10 nights, 0.5 % at 12, 0.3 % at
  15, 0.1 % at 20 to 25, under 0.01 % from 30 to 60 nights; 0.07 % over lengths drawn from 10 to 60. Short series
  are the hard case: their noise is estimated from few nights;
- a planted 10 % step (4.8 σ) is found at exactly its night (±0) in 78 % of series of 10 nights, 92 % of 15,
  94 % of 20, 96 % of 30 and 97.5 % of 45 to 60; within ±1 night 79 / 94 / 97 / 98 / 99.5 %. A 30 % step: at its
  exact night in 99.6 % or more at every length;
- a 3 % step (1.5 σ) is mostly missed: found at its night in 3 % of series of 10 to 20 nights, 5 % of 30, 12 % of
  45, 20 % of 60. For effects that small trust the paired comparison of one run (opmatrix.upgrade.compare).
Why ruptures and not Apache Otava (formerly DataStax's Hunter: E-Divisive means with a significance test per split):
Otava pins numpy and scipy versions that clash with the driver's; ruptures installs beside them, and PELT with a
penalty calibrated as above states its false-alarm rate as a measured number.

**Known good.** Per (kernel, backend[variant], device), a fingerprint is known good when every one of its rows is
`ok` and every timed row lies in its series' performance band: the segment between change points that the row
falls in has a median time within BAND = 5 % of the fastest segment of that series (device, kernel, workload, dtype,
backend, variant, toolchain). Judging segments, not single nights, keeps one noisy night from disqualifying a
version; rows without a time (correctness only) count on their status alone. A fingerprint with any other status (failed, or
only built for a device no host had) is not known good: nothing showed that it works.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from opmatrix import paths
from opmatrix.core.result import backend_label, split_backend_label
from opmatrix.core.status import OK
from opmatrix.store import StoreError

HISTORY = paths.REPORTS / "history"
KEY = ("device", "kernel", "workload", "dtype", "backend", "variant")  # what a row measured
# One series per key AND toolchain, over the nights: two toolchains timed on one night (tl014 beside tl015 of one
# nightly) are two series, never two points of one; inside a toolchain's series its fingerprint may move from
# night to night, and that move is what a change point names.
SERIES = (*KEY, "toolchain")
FILTER_KEYS = SERIES
VERSION_FIELDS = ("python", "torch", "triton", "tilelang", "driver", "runtime")  # the toolchain fingerprint
METRICS = ("median_ms", "speedup", "compile_s")  # positive numbers whose shifts are relative
COLUMNS = ["run_id", "night", *KEY, "toolchain", "device_name", "fingerprint", "versions", *VERSION_FIELDS,
           "status", "median_ms", "speedup", "speedup_lo", "speedup_hi", "rel_err", "compile_s"]
ORDER = ["night", "toolchain", "run_id"]  # the order of a series' points (two toolchains of one run: two points)

PENALTY = 29.0  # per change point, in units of the series' noise variance (calibration: module docstring)
FIRST_PASS = 0.5  # the first segmentation, only used to pool the noise within its segments, at this x PENALTY
MIN_NIGHTS = 2  # nights on a new level before it counts as a shift
NOISE_FLOOR = 0.005  # σ of log(value) is taken as at least 0.5 %: a flat series does not turn jitter into shifts
MAD_TO_SD = 1.4826  # median absolute deviation -> standard deviation, for normal noise
BAND = 0.05  # known good: a segment's median within 5 % of the fastest segment's
FINGERPRINT_CHARS = 12


class HistoryError(StoreError, ValueError):
    """A history that cannot be written or read as asked (the message names the file or folder and the fix)."""


@dataclass
class Shift:
    index: int  # position in the series of the first value on the new level
    night: str  # the first night of the shift (the run's start time, ISO 8601)
    run_id: str
    ratio: float  # median of the new segment / median of the one before
    changed: str  # what differs in the toolchain from the previous point: "tilelang 0.1.14 → 0.1.15"


@dataclass
class Trend:
    device: str
    kernel: str
    workload: str
    dtype: str
    backend: str
    variant: str
    toolchain: str
    metric: str
    nights: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    toolchains: list[str] = field(default_factory=list)
    fingerprints: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)  # fingerprint -> the versions it stands for
    shifts: list[Shift] = field(default_factory=list)

    def label(self) -> str:
        return " · ".join([self.kernel, self.device, self.workload, self.dtype,
                           backend_label(self.backend, self.variant), self.toolchain])


@dataclass
class KnownGood:
    kernel: str
    device: str
    backend: str  # backend[variant], as verdicts and deployments name it
    fingerprint: str
    versions: str
    first_night: str
    last_night: str
    runs: int

    def text(self) -> str:
        """'torch 2.11.0, ... (2026-11-30 03:00 → 2026-12-04 03:00, 5 run(s))'."""
        versions = self.versions or "versions not recorded"
        return f"{versions} ({short_night(self.first_night)} → {short_night(self.last_night)}, {self.runs} run(s))"


# ---------------------------------------------------------------------------------------------------- the store

def append_run(run_folder: Path, history_dir: Path = HISTORY) -> int:
    """Store one run's rows as <history_dir>/<run_id>.parquet, replacing an earlier append of the same run; returns
    the number of rows stored."""
    folder = Path(run_folder)
    rows = history_rows(folder)
    _write_atomically(rows, run_file(folder, history_dir))
    return len(rows)


def run_file(run_folder: Path, history_dir: Path = HISTORY) -> Path:
    """The history file a run is stored in: <history_dir>/<run_id>.parquet."""
    return Path(history_dir) / f"{_run_id(Path(run_folder))}.parquet"


def history_rows(run_folder: Path):
    """A stored run's rows as history rows (COLUMNS): key, night, fingerprint, outcome, time, paired speed-up."""
    from opmatrix.decide.stats import add_paired_columns

    df = add_paired_columns(_load_run(run_folder))
    df["run_id"] = _run_id(run_folder)
    df["night"] = _night(run_folder, df)
    versions = df[list(VERSION_FIELDS)].fillna("").astype(str)
    df[list(VERSION_FIELDS)] = versions
    df["versions"] = [versions_text(dict(zip(VERSION_FIELDS, v))) for v in versions.itertuples(index=False)]
    df["fingerprint"] = [fingerprint(dict(zip(VERSION_FIELDS, v))) for v in versions.itertuples(index=False)]
    return df[COLUMNS].reset_index(drop=True)


def read_history(history_dir: Path = HISTORY):
    """Every run stored in the history, in night order; HistoryError naming the file for one that cannot be read."""
    import pandas as pd

    folder = Path(history_dir)
    if not folder.is_dir():
        raise HistoryError(f"no history folder {folder}: create it with `opmatrix history append RUN` (a run id "
                           "under reports/ or a run folder)")
    frames = [df for df in (_read_file(p) for p in sorted(folder.glob("*.parquet"))) if len(df)]
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    df = pd.concat(frames, ignore_index=True)
    return df.sort_values(ORDER, kind="stable").reset_index(drop=True)


def fingerprint(versions: dict[str, str]) -> str:
    """A short stable hash of the versions a cell imported (the same versions: the same hash, on any machine)."""
    text = json.dumps([versions.get(name, "") or "" for name in VERSION_FIELDS])
    return hashlib.sha256(text.encode()).hexdigest()[:FINGERPRINT_CHARS]


def versions_text(versions: dict[str, str]) -> str:
    """'python 3.12.3, torch 2.11.0+cu130, triton 3.6.0, tilelang 0.1.15, driver 580.159.04, cuda 13.0'."""
    named = [f"{name} {versions[name]}" for name in VERSION_FIELDS[:-1] if versions.get(name)]
    return ", ".join(named + ([versions["runtime"]] if versions.get("runtime") else []))


def _load_run(folder: Path):
    from opmatrix.store import load_run

    try:
        return load_run(folder)
    except StoreError as exc:
        raise HistoryError(f"{folder} is not a run folder ({exc}); append a folder written by `opmatrix run` "
                           "(it holds results.jsonl)") from None
    except (OSError, ValueError) as exc:  # a damaged results.parquet (pyarrow's ArrowInvalid is a ValueError)
        raise HistoryError(f"{folder}: its rows cannot be read ({exc}); rebuild them with `opmatrix report "
                           f"{folder}` and append again") from None


def _manifest(folder: Path):
    from opmatrix.store import ResultStore

    try:
        return ResultStore(folder, create=False).read_manifest()
    except (ValueError, TypeError) as exc:
        raise HistoryError(f"{folder / 'run.json'} is not a valid run manifest ({exc}); restore it from the run "
                           "or remove it (the run id then is the folder name)") from None


def _run_id(folder: Path) -> str:
    manifest = _manifest(folder)
    run_id = (manifest.run_id if manifest else "") or folder.resolve().name
    if "/" in run_id or os.sep in run_id or run_id in (".", ".."):
        raise HistoryError(f"{folder}: run id {run_id!r} cannot name a history file; fix run_id in run.json")
    return run_id


def _night(folder: Path, df):
    """The run's start time (run.json), else its earliest row's; a tz-aware UTC timestamp."""
    import pandas as pd

    manifest = _manifest(folder)
    started = [s for s in df.get("started_at", pd.Series(dtype=str)).fillna("") if s]
    text = (manifest.started_at if manifest else "") or min(started, default="")
    try:
        night = pd.Timestamp(text)
    except ValueError:
        night = pd.NaT
    if not text or pd.isna(night):
        raise HistoryError(f"{folder}: no start time in run.json or its rows ({text!r}); the night of a run is its "
                           "start time: set started_at in run.json")
    return night.tz_localize("UTC") if night.tzinfo is None else night.tz_convert("UTC")


def _write_atomically(df, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # never matches *.parquet: readers skip it
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        df.to_parquet(tmp, index=False)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise HistoryError(f"cannot write {path}: {exc.strerror or exc}; make {path.parent} writable or name "
                           "another history folder (--history)") from None


def _read_file(path: Path):
    import pandas as pd

    try:
        df = pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        raise HistoryError(f"{path} is not a readable Parquet file ({exc}); delete it and append its run again "
                           "with `opmatrix history append RUN`") from None
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise HistoryError(f"{path} lacks the history columns {', '.join(missing)}; delete it and append its run "
                           "again with `opmatrix history append RUN`")
    df["night"] = pd.to_datetime(df["night"], utc=True)
    return df[COLUMNS]


# ------------------------------------------------------------------------------------------------ change points

def change_points(series, penalty: float = PENALTY, min_nights: int = MIN_NIGHTS) -> list[int]:
    """Where a series of positive values (times, ratios) moves to a new level: the index of the first value of each
    new segment. ruptures' PELT on log(value) scaled by the series' noise (module docstring). Fewer than
    2 x min_nights values: none."""
    x = _log_values(series)
    if len(x) < 2 * min_nights:
        return []
    first = _segment(x, _noise_from_differences(x), penalty * FIRST_PASS, min_nights)
    return _segment(x, _noise_within_segments(x, first), penalty, min_nights)


def _log_values(series) -> np.ndarray:
    values = np.asarray(list(series), dtype=float)
    if values.ndim != 1 or not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ValueError("change_points takes a flat series of positive, finite values (times or ratios)")
    return np.log(values)


def _segment(x: np.ndarray, noise: float, penalty: float, min_nights: int) -> list[int]:
    """PELT with the l2 cost on x in units of its noise; the start of every segment after the first."""
    import ruptures

    scaled = (x - np.median(x)) / max(noise, NOISE_FLOOR)
    ends = ruptures.KernelCPD(kernel="linear", min_size=min_nights).fit(scaled).predict(pen=penalty)
    return [int(e) for e in ends[:-1]]


def _noise_from_differences(x: np.ndarray) -> float:
    """σ of one value from the median absolute deviation of successive differences (a step moves only one)."""
    d = np.diff(x)
    return MAD_TO_SD * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2)


def _noise_within_segments(x: np.ndarray, starts: list[int]) -> float:
    """σ pooled within segments: the spread left once each segment's own level is taken out."""
    pieces = np.split(x, starts)
    residuals = np.concatenate([p - p.mean() for p in pieces])
    return float(np.sqrt(np.sum(residuals ** 2) / max(len(x) - len(pieces), 1)))


# ------------------------------------------------------------------------------------------------------- trends

def trends(history_df, metric: str = "median_ms", filters: dict[str, str] | None = None) -> list[Trend]:
    """Per series (device, kernel, workload, dtype, backend, variant, toolchain), its `ok` values over the nights,
    with the change points: the first night of each shift, its size, and what changed in the toolchain that
    night."""
    rows = usable(select(history_df, filters or {}), metric)
    return [_trend(key, group, metric) for key, group in rows.groupby(list(SERIES), sort=True)]


def select(history_df, filters: dict[str, str]):
    """The rows matching every key=value filter; `backend=tilelang[autotuned]` also matches the variant."""
    unknown = sorted(set(filters) - set(FILTER_KEYS))
    if unknown:
        raise HistoryError(f"unknown filter key {', '.join(map(repr, unknown))}: filter on "
                           f"{', '.join(FILTER_KEYS)}")
    mask = np.ones(len(history_df), dtype=bool)
    for key, value in _split_labels(filters).items():
        mask &= (history_df[key].astype(str) == value).to_numpy()
    return history_df[mask]


def usable(history_df, metric: str):
    """The `ok` rows with a positive, finite value of the metric."""
    if metric not in METRICS:
        raise HistoryError(f"metric {metric!r} is not one of {', '.join(METRICS)}")
    values = history_df[metric].astype(float)
    return history_df[(history_df.status == OK) & np.isfinite(values) & (values > 0)]


def what_changed(before: dict, after: dict) -> str:
    """The toolchain differences between two points: 'tilelang 0.1.14 → 0.1.15, driver 570.1 → 580.2'."""
    parts = [f"{name} {before[name] or '(none)'} → {after[name] or '(none)'}" for name in VERSION_FIELDS
             if (before[name] or "") != (after[name] or "")]
    if before["toolchain"] != after["toolchain"]:
        parts.insert(0, f"toolchain {before['toolchain']} → {after['toolchain']}")
    return ", ".join(parts) or "no toolchain change"


def _split_labels(filters: dict[str, str]) -> dict[str, str]:
    """backend=tilelang[tuned] filters on the backend and the variant."""
    out = dict(filters)
    split = split_backend_label(out.get("backend", ""))
    if split and "[" in out["backend"]:
        out["backend"], out["variant"] = split
    return out


def _trend(key: tuple, group, metric: str) -> Trend:
    group = group.sort_values(ORDER, kind="stable")
    records = group.to_dict("records")
    values = [float(r[metric]) for r in records]
    starts = change_points(values)
    return Trend(*key, metric=metric, nights=[_iso(r["night"]) for r in records], values=values,
                 run_ids=[r["run_id"] for r in records], toolchains=[r["toolchain"] for r in records],
                 fingerprints=[r["fingerprint"] for r in records],
                 versions={r["fingerprint"]: r["versions"] for r in records},
                 shifts=[_shift(records, values, starts, i) for i in range(len(starts))])


def _shift(records: list[dict], values: list[float], starts: list[int], i: int) -> Shift:
    k = starts[i]
    before = values[starts[i - 1] if i else 0:k]
    after = values[k:starts[i + 1] if i + 1 < len(starts) else len(values)]
    return Shift(k, _iso(records[k]["night"]), records[k]["run_id"],
                 float(np.median(after) / np.median(before)), what_changed(records[k - 1], records[k]))


# --------------------------------------------------------------------------------------------------- known good

def known_good(history_df) -> list[KnownGood]:
    """Per (kernel, backend[variant], device), the fingerprints under which every row was `ok` and in its
    performance band (module docstring), with their first and last night."""
    df = history_df.assign(good=(history_df.status == OK) & in_band(history_df))
    out = []
    for (kernel, device, backend, variant, print_), g in df.groupby(["kernel", "device", "backend", "variant",
                                                                       "fingerprint"], sort=True):
        if g.good.all():
            out.append(KnownGood(kernel, device, backend_label(backend, variant), print_, g.versions.iloc[0],
                                 _iso(g.night.min()), _iso(g.night.max()), g.run_id.nunique()))
    return sorted(out, key=lambda k: (k.kernel, k.device, k.backend, k.first_night))


def in_band(history_df):
    """Per row: True where its segment's median time is within BAND of the fastest segment of its series; rows
    without a time count as in band (they are judged on their status alone)."""
    import pandas as pd

    band = pd.Series(True, index=history_df.index)
    timed = usable(history_df, "median_ms")
    for _, group in timed.groupby(list(SERIES)):
        group = group.sort_values(ORDER, kind="stable")
        medians = _segment_medians(group.median_ms.to_numpy(dtype=float), change_points(group.median_ms))
        band.loc[group.index] = medians <= medians.min() * (1 + BAND)
    return band


def _segment_medians(values: np.ndarray, starts: list[int]) -> np.ndarray:
    """Each value replaced by the median of the segment it lies in."""
    return np.concatenate([np.full(len(p), np.median(p)) for p in np.split(values, starts)])


def _iso(night) -> str:
    return night.isoformat() if hasattr(night, "isoformat") else str(night)


def short_night(night: str) -> str:
    """'2026-11-30T03:51:39+00:00' -> '2026-11-30 03:51'."""
    return night[:16].replace("T", " ")
