"""The result store: reports/<run-id>/results.jsonl, appended and flushed the moment a result exists, and
results.parquet, consolidated from it. Everything downstream (reports, comparisons, verdicts) reads these.

A run folder is written by one run at a time: `ResultStore.lock()` takes an exclusive lock (flock) held for the
whole run, and a second run on the same folder is refused with the holder's pid and host. Reading validates every
row; a damaged line is skipped and reported with its file and line number, never guessed at.
"""
from __future__ import annotations

import collections
import contextlib
import errno
import fcntl
import functools
import json
import os
import dataclasses
import socket
from dataclasses import dataclass, field
from pathlib import Path

from opmatrix import paths
from opmatrix.core.acceptance import DEFAULT_BASELINE
from opmatrix.core.keys import KEY_FIELDS
from opmatrix.core.result import COLUMNS, NUMERIC, Result, RowError, backend_labels, checked_fields
from opmatrix.core.text import visible_frame
from opmatrix.manifest import RunManifest

RESULTS_JSONL = "results.jsonl"
RESULTS_PARQUET = "results.parquet"
MANIFEST = "run.json"
COMPARISON = "comparison"  # .json / .md / .junit.xml: a run of a matrix with [[compare]] (opmatrix.upgrade)
REPORT_HTML = "report.html"  # the run as one self-contained page, beside report.md (opmatrix.report.html)
VERDICTS_JSON = "verdicts.json"  # written beside report.md by a run timed in rounds (opmatrix.decide)
LOCK = ".lock"
SKIPPED = "skipped.txt"  # the lines of results.jsonl that are not valid rows, as the last report found them
CUT = "results.cut.txt"  # lines a crash cut short at the end of results.jsonl, moved out by --resume (repair_tail)
WRITE_PROBE_BYTES = 64 * 1024  # room for a few rows: what check_writable proves the run folder still has
RESERVE = ".space-reserve"  # held during a run, given back when the disk fills: room for run.json and the report
RESERVE_BYTES = 512 * 1024
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
LISTS = {f.name for f in dataclasses.fields(Result) if f.type.startswith("list[")}
FLOAT_LISTS = {f.name for f in dataclasses.fields(Result) if f.type == "list[float]"}  # held as numpy arrays
_DEFAULTS = {f.name: f.default_factory if f.default_factory is not dataclasses.MISSING else (lambda v=f.default: v)
             for f in dataclasses.fields(Result)}  # field -> a maker of its default (a list field: a new list)


class RunLocked(Exception):
    """Another run holds the run folder."""


class StoreError(Exception):
    """A run folder that cannot be read or written as asked (the message names it and the fix)."""


class RowsMissing(Exception):
    """A run ended with rows lost from its results.jsonl, or with planned jobs that have no row though no deadline
    stopped them: the message says which. `code` is the exit status of such a run."""

    code = 4


class DiskFull(Exception):
    """The disk of the run folder filled while a row was written: the row was taken back whole (no partial line is
    left), the rows before it are kept. `code` is the exit status of a run stopped by it."""

    code = 3

    def __init__(self, path: Path, exc: OSError) -> None:
        super().__init__(f"the disk of {path} is full ({exc.strerror or exc}): the run stopped; the rows stored "
                         "before it are kept. Free space there and continue with --resume")


@dataclass
class Loaded:
    """results.jsonl as read (read_jsonl): every valid row's fields as columns, one list per Result field in file
    order, a row's list of floats as a numpy array (a Python float per sample is most of a large run's memory),
    and the lines that are not valid rows. frame(loaded) is the run as a DataFrame; `results`, the rows as Result
    objects."""
    columns: dict[str, list] = field(default_factory=lambda: {name: [] for name in COLUMNS})
    skipped: list[str] = field(default_factory=list)  # "file:line: why" for every line that is not a valid row

    @property
    def results(self) -> list[Result]:
        """The rows as Result objects (their lists as lists), in file order."""
        columns = [[_as_list(v) for v in self.columns[name]] if name in FLOAT_LISTS else self.columns[name]
                   for name in COLUMNS]
        return [Result(**dict(zip(COLUMNS, values))) for values in zip(*columns)]


class ResultStore:
    def __init__(self, run_dir: Path, create: bool = True) -> None:
        self.run_dir = Path(run_dir)
        if create:
            try:
                self.run_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # a read-only place, a file in the way, no permission
                raise StoreError(_cannot_write(self.run_dir, exc)) from None
        self.jsonl = self.run_dir / RESULTS_JSONL

    def check_writable(self) -> None:
        """Write, sync and remove a probe of WRITE_PROBE_BYTES in the run folder: a read-only or full folder is
        refused before any work starts, instead of failing at the first result and losing it."""
        probe = self.run_dir / f".write-probe-{os.getpid()}"
        try:
            with open(probe, "wb") as fh:
                fh.write(bytes(WRITE_PROBE_BYTES))
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise StoreError(_cannot_write(self.run_dir, exc)) from None
        finally:
            with contextlib.suppress(OSError):
                probe.unlink(missing_ok=True)

    @contextlib.contextmanager
    def lock(self, who: str = "opmatrix run", instead: str = "or choose another --run-id"):
        """Exclusive use of the run folder for as long as the block runs, by `who` (named to anyone refused)."""
        path = self.run_dir / LOCK
        fh = open(path, "a+", encoding="utf-8")
        try:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                holder = fh.read().strip() or "another process"
                raise RunLocked(f"{self.run_dir} is in use by {holder}: wait for that run to finish, "
                                f"{instead}") from None
            fh.seek(0)
            fh.truncate()
            fh.write(f"{who} (pid {os.getpid()} on {socket.gethostname()})")
            fh.flush()
            yield self
        finally:
            fh.close()

    def append(self, result: Result) -> None:
        """Durable before it returns: a crash after this loses nothing already stored. A line that an earlier crash
        left unfinished is closed first, so it stays one skipped line instead of swallowing this row. A write that
        fails (the disk filled) is taken back to the file's previous end: the row is stored whole or not at all;
        DiskFull (no space) or StoreError (any other failure) says so."""
        data = (result.to_json() + "\n").encode()
        fd = os.open(self.jsonl, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)  # unbuffered: nothing written later
        try:
            end = os.fstat(fd).st_size
            if end and os.pread(fd, 1, end - 1) != b"\n":
                data = b"\n" + data
            try:
                written = 0
                while written < len(data):  # appended at the end (O_APPEND), however the writes are split
                    written += os.write(fd, data[written:])
                os.fsync(fd)
            except OSError as exc:
                _take_back(fd, end)
                if exc.errno in NO_SPACE:
                    raise DiskFull(self.jsonl, exc) from None
                raise StoreError(f"cannot write a row to {self.jsonl}: {exc.strerror or exc}; the rows before it "
                                 "are kept: fix it and continue with --resume") from None
        finally:
            os.close(fd)

    def repair_tail(self) -> str:
        """A results.jsonl whose last line has no newline was cut short while a row was written (`kill -9`, a power
        cut): that job has no row, and --resume runs it again. Move the cut line out, to results.cut.txt beside it,
        so the store reads clean again (`report --strict` accepts it). Returns the moved text ("" when none)."""
        if not self.jsonl.is_file():
            return ""
        fd = os.open(self.jsonl, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            if not size or os.pread(fd, 1, size - 1) == b"\n":
                return ""
            start = max(0, size - 1024 * 1024)
            head = os.pread(fd, size - start, start)
            end = start + head.rfind(b"\n") + 1 if b"\n" in head else 0
            cut = os.pread(fd, size - end, end)
            try:
                Result.from_json(cut.decode("utf-8"))
                os.pwrite(fd, b"\n", size)  # a whole row that lost only its newline: it stays
                os.fsync(fd)
                return ""
            except (ValueError, RowError):  # UnicodeDecodeError and JSON errors are ValueErrors
                pass
            with open(self.run_dir / CUT, "ab") as kept:
                kept.write(cut + b"\n")
                kept.flush()
                os.fsync(kept.fileno())
            os.ftruncate(fd, end)
            os.fsync(fd)
            return cut.decode("utf-8", "replace")
        finally:
            os.close(fd)

    def reserve(self) -> None:
        """Hold RESERVE_BYTES in the run folder for as long as the run writes rows: when the disk fills, release()
        gives them back, so that run.json and the report can still be written. Best effort: a folder without that
        much room was refused by check_writable already, or runs without a reserve."""
        path = self.run_dir / RESERVE
        try:
            with open(path, "wb") as fh:
                fh.write(bytes(RESERVE_BYTES))
                fh.flush()
                os.fsync(fh.fileno())
        except OSError:
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)

    def release(self) -> None:
        with contextlib.suppress(OSError):
            (self.run_dir / RESERVE).unlink(missing_ok=True)

    def load(self) -> Loaded:
        return read_jsonl(self.jsonl)

    def results(self) -> list[Result]:
        return self.load().results

    def write_manifest(self, manifest: RunManifest) -> None:
        _atomic_write(self.run_dir / MANIFEST, manifest.to_json().encode())

    def read_manifest(self) -> RunManifest | None:
        return read_manifest(self.run_dir)

    def manifest(self) -> RunManifest:
        """run.json, typed; a run folder without one (results copied from elsewhere) gets an empty manifest."""
        return self.read_manifest() or RunManifest(run_id=self.run_dir.name)

    def consolidate(self, baseline: str | None = None, loaded: Loaded | None = None):
        """results.parquet written from the rows, and returned as a DataFrame (frame, add_speedup); `loaded`: the
        rows as this store's load() already read them (results.jsonl is then not read again)."""
        manifest = self.read_manifest()
        df = add_speedup(frame(loaded if loaded is not None else self.load()), baseline or _baseline(manifest))
        tmp = self.run_dir / (RESULTS_PARQUET + ".tmp")
        df.to_parquet(tmp, index=False)
        tmp.replace(self.run_dir / RESULTS_PARQUET)
        return df


def read_manifest(folder: Path) -> RunManifest | None:
    """A run folder's run.json, typed: the one reader of that file."""
    path = Path(folder) / MANIFEST
    return RunManifest.from_json(path.read_text()) if path.is_file() else None


def read_jsonl(path: Path) -> Loaded:
    """The one reader of results.jsonl, in one pass: each line checked as Result.from_json checks it
    (core.result.checked_fields), its fields appended to the columns, a field it lacks as its default; a line that
    is not a valid row is skipped and said (file, line, why). A text repeated from row to row (ids, statuses,
    versions) is kept once; a list of floats becomes an array (_as_array)."""
    loaded = Loaded()
    if not path.is_file():
        return loaded
    columns, skipped = loaded.columns, loaded.skipped
    texts: dict[str, str] = {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                values = checked_fields(json.loads(line))
            except (ValueError, RowError) as exc:  # cut short by a crash mid-write, or damaged
                skipped.append(f"{path}:{number}: {exc}")
                continue
            for name, make in _DEFAULTS.items():
                value = values[name] if name in values else make()
                if value.__class__ is str:
                    value = texts.setdefault(value, value)
                elif name in FLOAT_LISTS:
                    value = _as_array(value)
                columns[name].append(value)
    return loaded


def frame(rows: Loaded | list[Result]):
    """The rows (as read, or Result objects) as a DataFrame with every column: numbers as floats, a list of floats as
    an array (as pandas reads it back from results.parquet), a job's last row where it was run again."""
    import pandas as pd

    if isinstance(rows, Loaded):
        columns = rows.columns
    else:
        columns = {name: [_as_array(getattr(r, name)) if name in FLOAT_LISTS else getattr(r, name) for r in rows]
                   for name in COLUMNS}
    df = pd.DataFrame({name: pd.Series(columns[name], dtype="float64" if name in NUMERIC else
                                       object if name in LISTS else None) for name in COLUMNS}, columns=COLUMNS)
    return df.drop_duplicates(subset=["run_id", *KEY_FIELDS], keep="last").reset_index(drop=True)


def _as_array(values):
    """A row's list of numbers as an array of the numbers' own kind (floats: float64; whole numbers, such as NVML's
    clocks: int64), as results.parquet stores them; an empty list stays a list (a column no row fills is stored as a
    list of nulls)."""
    import numpy as np

    return np.array(values) if len(values) else []


def _as_list(values) -> list:
    return values.tolist() if hasattr(values, "tolist") else list(values)


def with_every_column(df):
    """A frame read from a results.parquet written before a field existed, given that field's default for every
    row (a list field: an empty list), so readers never test for columns."""
    for name, make in _DEFAULTS.items():
        if name not in df.columns:
            df[name] = [make() for _ in range(len(df))]  # a list field: a list of its own per row
    return df


def frame_rows(df, columns=None) -> list:
    """The frame's rows as named tuples, as df.itertuples(index=False) gives them (Python values, NaN where a cell is
    missing), each column read whole first (Series.tolist): iterated, pandas' Arrow-backed text columns hand out one
    cell at a time, about a microsecond each, which is seconds over a 200,000-row run. columns: only these."""
    names = tuple(df.columns if columns is None else columns)
    make = _row_type(names)._make
    return [make(values) for values in zip(*(df[name].tolist() for name in names))]


@functools.lru_cache(maxsize=64)
def _row_type(names: tuple[str, ...]):
    return collections.namedtuple("Row", names, rename=True)  # as itertuples names them


def labelled(df, label: str):
    """A boolean mask of the frame's rows whose backend[variant] reads `label` (core.result.backend_label)."""
    import numpy as np

    return np.asarray([name == label for name in backend_labels(df)], dtype=bool)


def add_speedup(df, baseline: str):
    """speedup_vs_framework = baseline median / this median, same cell, kernel, workload and dtype."""
    base = df[(df.backend == baseline) & (df.status == "ok") & df.median_ms.notna()]
    base = base.groupby(["run_id", "cell", "kernel", "workload", "dtype"]).median_ms.min().rename("_base")
    df = df.drop(columns=["speedup_vs_framework"]).join(base, on=["run_id", "cell", "kernel", "workload", "dtype"])
    df["speedup_vs_framework"] = df["_base"] / df["median_ms"]
    return df.drop(columns=["_base"])[COLUMNS]


def known_runs(reports_dir: Path) -> list[str]:
    if not Path(reports_dir).is_dir():
        return []
    return sorted(p.name for p in Path(reports_dir).iterdir() if (p / RESULTS_JSONL).is_file())


def run_dir(run: str | Path, reports_dir: Path = paths.REPORTS) -> Path:
    """The folder of an existing run (an id under reports_dir, or a path); StoreError naming the known runs."""
    for path in (Path(run), Path(reports_dir) / str(run)):
        if path.is_dir() and (path / RESULTS_JSONL).is_file():
            return path
    runs = ", ".join(known_runs(reports_dir)) or "none"
    where = f"{run} has no {RESULTS_JSONL}" if Path(run).is_dir() else f"no run {str(run)!r} under {reports_dir}"
    raise StoreError(f"{where}; runs there: {runs}")


def load_run(run: str | Path, reports_dir: Path = paths.REPORTS):
    """One run as a DataFrame: results.parquet when consolidated, else straight from results.jsonl."""
    import pandas as pd

    folder = run_dir(run, reports_dir)
    if (folder / RESULTS_PARQUET).is_file():
        # rows read back from JSON are made safe by Result.from_dict; a parquet written before that, here
        return visible_frame(with_every_column(pd.read_parquet(folder / RESULTS_PARQUET)))
    store = ResultStore(folder, create=False)
    manifest = store.read_manifest()
    return add_speedup(frame(store.load()), _baseline(manifest))


def load_all(reports_dir: Path = paths.REPORTS):
    """Every run under reports/ in one DataFrame (history for comparisons)."""
    import pandas as pd

    frames = [load_run(Path(reports_dir) / name) for name in known_runs(reports_dir)]
    return pd.concat(frames, ignore_index=True) if frames else frame([])


def _baseline(manifest: RunManifest | None) -> str:
    return manifest.acceptance.baseline if manifest else DEFAULT_BASELINE


def _cannot_write(folder: Path, exc: OSError) -> str:
    return (f"cannot write the run folder {folder}: {exc.strerror or exc}; nothing was run. Free space there, make it "
            "writable, or choose another --reports folder")


def _take_back(fd: int, end: int) -> None:
    """Cut the file back to `end` after a failed append: a half-written row must not stay behind (a later report
    --strict would refuse the run for it)."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, end)
        os.fsync(fd)


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
