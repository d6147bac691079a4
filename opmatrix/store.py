"""The result store: reports/<run-id>/results.jsonl, appended and flushed the moment a result exists, and
results.parquet, consolidated from it. Everything downstream (reports, comparisons, verdicts) reads these."""
from __future__ import annotations

import json
import os
from pathlib import Path

from opmatrix import paths
from opmatrix.core.result import COLUMNS, NUMERIC, Result

KEY = ["cell", "kernel", "workload", "dtype", "backend", "variant"]
RESULTS_JSONL = "results.jsonl"
RESULTS_PARQUET = "results.parquet"
MANIFEST = "run.json"


class ResultStore:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.jsonl = self.run_dir / RESULTS_JSONL

    def append(self, result: Result) -> None:
        """Durable before it returns: a crash after this loses nothing already stored."""
        with open(self.jsonl, "a", encoding="utf-8") as fh:
            fh.write(result.to_json() + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def results(self) -> list[Result]:
        return read_jsonl(self.jsonl)

    def write_manifest(self, manifest: dict) -> None:
        _atomic_write(self.run_dir / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True).encode())

    def manifest(self) -> dict:
        path = self.run_dir / MANIFEST
        return json.loads(path.read_text()) if path.is_file() else {}

    def consolidate(self, baseline: str = "torch"):
        df = add_speedup(frame(self.results()), baseline)
        tmp = self.run_dir / (RESULTS_PARQUET + ".tmp")
        df.to_parquet(tmp, index=False)
        tmp.replace(self.run_dir / RESULTS_PARQUET)
        return df


def read_jsonl(path: Path) -> list[Result]:
    results = []
    if not path.is_file():
        return results
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            results.append(Result.from_json(line))
        except json.JSONDecodeError:
            continue  # a line cut short by a crash mid-write; every complete line before it is kept
    return results


def frame(results: list[Result]):
    import pandas as pd

    df = pd.DataFrame([vars(r) for r in results], columns=COLUMNS)
    # Numbers are floats whatever the rows hold: a field absent from older rows (None) becomes NaN, not object.
    df[NUMERIC] = df[NUMERIC].astype("float64")
    return df.drop_duplicates(subset=["run_id"] + KEY, keep="last").reset_index(drop=True)


def add_speedup(df, baseline: str = "torch"):
    """speedup_vs_framework = baseline median / this median, same cell, kernel, workload and dtype."""
    base = df[(df.backend == baseline) & (df.status == "ok") & df.median_ms.notna()]
    base = base.groupby(["run_id", "cell", "kernel", "workload", "dtype"]).median_ms.min().rename("_base")
    df = df.drop(columns=["speedup_vs_framework"]).join(base, on=["run_id", "cell", "kernel", "workload", "dtype"])
    df["speedup_vs_framework"] = df["_base"] / df["median_ms"]
    return df.drop(columns=["_base"])[COLUMNS]


def run_dir(run: str | Path, reports_dir: Path = paths.REPORTS) -> Path:
    path = Path(run)
    if path.is_dir():
        return path
    if (reports_dir / str(run)).is_dir():
        return reports_dir / str(run)
    runs = ", ".join(sorted(p.name for p in reports_dir.iterdir() if (p / RESULTS_JSONL).is_file())) or "none"
    raise FileNotFoundError(f"no run {run!r} under {reports_dir}; runs there: {runs}")


def load_run(run: str | Path, reports_dir: Path = paths.REPORTS):
    """One run as a DataFrame: results.parquet when consolidated, else straight from results.jsonl."""
    import pandas as pd

    folder = run_dir(run, reports_dir)
    if (folder / RESULTS_PARQUET).is_file():
        return pd.read_parquet(folder / RESULTS_PARQUET)
    return add_speedup(frame(read_jsonl(folder / RESULTS_JSONL)))


def load_all(reports_dir: Path = paths.REPORTS):
    """Every run under reports/ in one DataFrame (history for comparisons)."""
    import pandas as pd

    runs = sorted(p for p in Path(reports_dir).iterdir() if (p / RESULTS_JSONL).is_file())
    frames = [load_run(p) for p in runs]
    return pd.concat(frames, ignore_index=True) if frames else frame([])


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
