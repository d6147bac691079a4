"""The store: each result is on disk the moment it is appended; Parquet consolidation keeps the column contract;
the pandas loaders read one run or all runs."""
import json

import pandas as pd
import pytest

import opmatrix
from opmatrix.core.result import COLUMNS, Result, backend_label, split_backend_label
from opmatrix.manifest import RunManifest
from opmatrix.store import ResultStore, add_speedup, frame

CONTRACT = ["run_id", "cell", "device", "device_name", "vendor", "arch", "driver", "runtime", "python", "torch",
            "tilelang", "triton", "kernel", "workload", "shape", "dtype", "backend", "status", "error", "rel_err",
            "tolerance", "compile_s", "median_ms", "p10_ms", "p90_ms", "reps", "tflops", "gbps",
            "speedup_vs_framework"]


def row(backend, median, run_id="r1", status="ok", **kw):
    return Result(run_id=run_id, cell="cpu.host", device="cpu", kernel="k", workload="w", dtype="float32",
                  backend=backend, status=status, median_ms=median, samples_ms=[median] * 3 if median else [],
                  **kw)


def test_append_is_on_disk_immediately(tmp_path):
    store = ResultStore(tmp_path / "run")
    store.append(row("torch", 2.0))
    lines = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["backend"] == "torch"


def test_round_trip_through_parquet_keeps_every_field(tmp_path):
    store = ResultStore(tmp_path / "r1")
    originals = [row("torch", 2.0, rel_err=1e-7, config='{"a": 1}'), row("triton", 1.0),
                 row("tilelang", None, status="compile_error", error="boom\nline 2")]
    for r in originals:
        store.append(r)
    df = store.consolidate()
    assert set(CONTRACT) <= set(df.columns) and list(df.columns) == COLUMNS
    back = pd.read_parquet(tmp_path / "r1" / "results.parquet")
    assert list(back.backend) == ["torch", "triton", "tilelang"]
    assert back.loc[0, "rel_err"] == 1e-7 and list(back.loc[1, "samples_ms"]) == [1.0, 1.0, 1.0]
    assert back.loc[2, "error"] == "boom\nline 2"
    assert Result.from_json(originals[0].to_json()) == originals[0]


def test_speedup_is_against_the_framework_baseline_of_the_same_cell(tmp_path):
    df = add_speedup(frame([row("torch", 2.0), row("triton", 1.0), row("tilelang", 4.0),
                            row("torch", 1.0, run_id="r2"), row("triton", 2.0, run_id="r2")]), "torch")
    got = {(r.run_id, r.backend): r.speedup_vs_framework for r in df.itertuples()}
    assert got[("r1", "triton")] == 2.0 and got[("r1", "tilelang")] == 0.5 and got[("r1", "torch")] == 1.0
    assert got[("r2", "triton")] == 0.5


def test_a_line_cut_short_by_a_crash_loses_only_itself(tmp_path):
    store = ResultStore(tmp_path / "r1")
    store.append(row("torch", 2.0))
    with open(store.jsonl, "a") as fh:
        fh.write('{"run_id": "r1", "backend": "tri')
    assert [r.backend for r in store.results()] == ["torch"]


def test_pandas_loaders_for_one_run_and_all_runs(tmp_path):
    for run_id in ("r1", "r2"):
        store = ResultStore(tmp_path / run_id)
        store.append(row("torch", 2.0, run_id=run_id))
        if run_id == "r1":
            store.consolidate()  # r2 stays jsonl-only, as after a crash
    assert list(opmatrix.load_run("r1", tmp_path).run_id) == ["r1"]
    assert list(opmatrix.load_run(tmp_path / "r2").backend) == ["torch"]
    assert sorted(opmatrix.load_all(tmp_path).run_id) == ["r1", "r2"]


def test_reports_render_from_rows_written_before_newer_columns(tmp_path):
    """A run stored by an older opmatrix (no telemetry, no ceilings) still reports, and claims nothing it lacks."""
    from opmatrix import report

    old = {"run_id": "r0", "cell": "h200.host", "device": "h200", "kernel": "k", "workload": "w",
           "dtype": "float16", "backend": "torch", "status": "ok", "median_ms": 1.0, "rel_err": 1e-4,
           "tolerance": 2e-3, "trials": 3, "samples_ms": [1.0], "timer": "cuda-events", "flops": 1e12}
    (tmp_path / "r0").mkdir()
    (tmp_path / "r0" / "results.jsonl").write_text(json.dumps(old) + "\n")
    text = report.markdown(opmatrix.load_run("r0", tmp_path), RunManifest(run_id="r0"))
    assert "no telemetry" in text and "% of roofline" not in text


@pytest.mark.parametrize("backend, variant", [("torch", "default"), ("tilelang", "tuned"), ("torch-compile", "max")])
def test_a_backend_label_splits_back_into_backend_and_variant(backend, variant):
    assert split_backend_label(backend_label(backend, variant)) == (backend, variant)


@pytest.mark.parametrize("text", ["", "tilelang[", "tilelang[tuned", "a b", "[tuned]", "tilelang[tu ned]"])
def test_text_that_is_not_a_backend_label_does_not_split(text):
    assert split_backend_label(text) is None


def test_a_full_disk_is_diskfull_and_leaves_no_partial_line(tmp_path):
    """/dev/full answers every write with ENOSPC: the append raises DiskFull, and nothing else."""
    from opmatrix.store import DiskFull

    store = ResultStore(tmp_path / "run")
    store.jsonl.symlink_to("/dev/full")
    with pytest.raises(DiskFull, match="is full"):
        store.append(row("torch", 2.0))


def test_resume_moves_a_cut_last_line_out_and_keeps_a_whole_row_without_its_newline(tmp_path):
    from opmatrix.store import CUT

    store = ResultStore(tmp_path / "run")
    store.append(row("torch", 2.0))
    whole = store.jsonl.read_text()
    store.jsonl.write_text(whole + whole.rstrip("\n"))  # a whole row that lost only its newline
    assert store.repair_tail() == "" and store.jsonl.read_text() == whole * 2
    store.jsonl.write_text(whole + whole[:50])  # half a row
    assert store.repair_tail() == whole[:50]
    assert store.jsonl.read_text() == whole and (store.run_dir / CUT).read_text() == whole[:50] + "\n"
    assert store.load().skipped == [] and store.repair_tail() == ""


def test_a_report_reads_results_jsonl_once(tmp_path, monkeypatch):
    """`opmatrix report` (report.build.finish) reads the store in one pass: the skipped lines and the consolidated
    frame come from the same reading."""
    import io

    from rich.console import Console

    from opmatrix import store as store_module
    from opmatrix.report.build import finish

    store = ResultStore(tmp_path / "r1")
    for r in (row("torch", 2.0), row("triton", 1.0)):
        store.append(r)
    with open(store.jsonl, "a") as fh:
        fh.write("not a row\n")
    reads = []
    real = store_module.read_jsonl
    monkeypatch.setattr(store_module, "read_jsonl", lambda path: reads.append(path) or real(path))
    monkeypatch.setenv("OPMATRIX_HTML", "0")
    finish(store, Console(file=io.StringIO()))
    assert reads == [store.jsonl]
    assert (store.run_dir / "skipped.txt").read_text().startswith(f"{store.jsonl}:3: Expecting value")
    assert list(pd.read_parquet(store.run_dir / "results.parquet").backend) == ["torch", "triton"]


def test_every_bad_line_is_skipped_naming_its_first_wrong_field(tmp_path):
    """Rows read after valid rows of the same shape are checked as fully as the first (their classes alone let a
    row skip no check: a list's elements are always looked at)."""
    from opmatrix.core import status

    good = json.loads(row("torch", 2.0, round_ms=[1.0, 2.0]).to_json())
    bad = [dict(good, samples_ms=[1.0, True]), dict(good, round_ms=[1.0, "2"]), dict(good, median_ms="fast"),
           dict(good, trials="3", median_ms="x"), dict(good, status="fine"), dict(good, round_position=[0, 1.5]),
           dict(good, clock_dropped=1)]
    store = ResultStore(tmp_path / "r1")
    lines = [good, *bad, dict(good, backend="triton", unknown_field=1)]
    store.jsonl.write_text("".join(json.dumps(x) + "\n" for x in lines))
    loaded = store.load()
    assert [s.split(": ", 1)[1] for s in loaded.skipped] == [
        "field 'samples_ms' has the wrong type: [1.0, True] (list[float] expected)",
        "field 'round_ms' has the wrong type: [1.0, '2'] (list[float] expected)",
        "field 'median_ms' has the wrong type: 'fast' (float | None expected)",
        "field 'trials' has the wrong type: '3' (int expected)",
        "status 'fine' is not one of " + ", ".join(status.ALL),
        "field 'round_position' has the wrong type: [0, 1.5] (list[int] expected)",
        "field 'clock_dropped' has the wrong type: 1 (bool | None expected)"]
    assert [s.split(": ", 1)[0] for s in loaded.skipped] == [f"{store.jsonl}:{n}" for n in range(2, 9)]
    assert [r.backend for r in loaded.results] == ["torch", "triton"]


def test_rows_as_read_hold_their_lists_of_numbers_as_arrays_and_give_them_back_as_lists(tmp_path):
    import numpy as np

    stored = [row("torch", 2.0, round_sm_mhz=[1980, 1965], round_position=[0, 1]), row("triton", None)]
    store = ResultStore(tmp_path / "r1")
    for r in stored:
        store.append(r)
    loaded = store.load()
    assert loaded.results == stored  # whole numbers stay whole, an empty list a list
    df = frame(loaded)
    assert df.samples_ms[0].dtype == np.float64 and df.round_sm_mhz[0].dtype == np.int64
    assert df.samples_ms[1] == [] and df.round_position[0] == [0, 1]
    assert df.median_ms.dtype == np.float64 and np.isnan(df.median_ms[1])


def test_frame_rows_are_the_rows_itertuples_gives(tmp_path):
    from opmatrix.store import frame_rows

    df = frame([row("torch", 2.0, error="x"), row("triton", None, status="compile_error")])
    assert [tuple(map(str, r)) for r in frame_rows(df)] == [tuple(map(str, r)) for r in df.itertuples(index=False)]
    picked = frame_rows(df, ["backend", "median_ms"])
    assert picked[0].backend == "torch" and picked[0].median_ms == 2.0 and picked[1].median_ms != picked[1].median_ms
