"""The nightly history (opmatrix.upgrade.history): one Parquet file per run, change points from ruptures' PELT
calibrated on synthetic nights (false alarms on pure noise, planted steps found at their night), what changed in the
toolchain the night a shift starts, known-good versions, and the `history` command's errors."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from opmatrix import cli, paths
from opmatrix.commands import history as history_command
from opmatrix.core.result import Result
from opmatrix.manifest import RunManifest
from opmatrix.store import ResultStore
from opmatrix.upgrade import history
from opmatrix.upgrade.history import (COLUMNS, FILTER_KEYS, HistoryError, append_run, change_points, known_good,
                                      read_history, trends)

NOISE = 0.02  # sd of log(time) night to night: 2 %
VERSIONS = {"python": "3.12.3", "torch": "2.11.0", "triton": "3.6.0", "tilelang": "0.1.14", "driver": "580.159.04",
            "runtime": "cuda 13.0"}
NIGHTS = 16
UPGRADE_NIGHT = 8  # tilelang 0.1.14 -> 0.1.15, and tilelang's kernel 10 % slower from this night on


def night(i: int) -> str:
    return f"2026-12-{i + 1:02d}T03:00:00+00:00"


def write_run(reports: Path, run_id: str, started: str, rows: list[dict]) -> Path:
    """A stored run on h200 (gemm_relu, square_4096, float16): one row per dict (backend, status, times, versions)."""
    store = ResultStore(reports / run_id)
    for row in rows:
        fields = {"backend": "torch", "status": "ok", **VERSIONS, **row}
        store.append(Result(run_id=run_id, cell="h200.host", device="h200", toolchain="host", kernel="gemm_relu",
                            workload="square_4096", dtype="float16", **fields))
    store.write_manifest(RunManifest(run_id=run_id, started_at=started, baseline="torch"))
    return reports / run_id


def history_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="opmatrix")
    history_command.add_parser(p.add_subparsers(dest="command", required=True))
    return p


def run_cli(*words: str) -> int:
    args = history_parser().parse_args(["history", *words])
    return args.func(args)


@pytest.fixture(scope="module")
def nightly(tmp_path_factory):
    """NIGHTS stored runs appended to a history: torch flat; tilelang 10 % slower from UPGRADE_NIGHT, the night its
    version moves from 0.1.14 to 0.1.15. Returns (reports folder, history folder)."""
    root = tmp_path_factory.mktemp("nightly")
    rng = np.random.default_rng(7)
    for i in range(NIGHTS):
        upgraded = i >= UPGRADE_NIGHT
        versions = {"tilelang": "0.1.15" if upgraded else "0.1.14"}
        rows = [{"backend": "torch", "median_ms": float(np.exp(rng.normal(0, 0.01))), **versions},
                {"backend": "tilelang", "variant": "tuned", "median_ms": (1.10 if upgraded else 1.0)
                 * float(np.exp(rng.normal(0, 0.01))), **versions}]
        append_run(write_run(root / "reports", f"night-{i:02d}", night(i), rows), root / "history")
    return root / "reports", root / "history"


# ---------------------------------------------------------------------------------------------------- the store

def test_a_run_is_one_parquet_file_and_appending_it_again_replaces_that_file(tmp_path):
    folder = write_run(tmp_path / "reports", "night-01", night(0), [
        {"backend": "torch", "median_ms": 1.0, "compile_s": 0.5, "rel_err": 1e-4},
        {"backend": "tilelang", "variant": "tuned", "median_ms": 0.9},
        {"backend": "triton", "status": "mismatch", "rel_err": 0.5, "tilelang": "0.1.15"}])
    hist = tmp_path / "history"

    assert append_run(folder, hist) == 3
    first = read_history(hist)
    assert append_run(folder, hist) == 3
    again = read_history(hist)

    assert sorted(p.name for p in hist.iterdir()) == ["night-01.parquet"]  # no second file, no temporary left
    pd.testing.assert_frame_equal(first, again)
    assert list(again.columns) == COLUMNS
    assert set(again.night) == {pd.Timestamp(night(0))}
    rows = again.set_index("backend")
    assert rows.loc["torch", "versions"] == ("python 3.12.3, torch 2.11.0, triton 3.6.0, tilelang 0.1.14, "
                                             "driver 580.159.04, cuda 13.0")
    assert rows.loc["torch", "fingerprint"] == rows.loc["tilelang", "fingerprint"] == history.fingerprint(VERSIONS)
    assert rows.loc["triton", "fingerprint"] != rows.loc["torch", "fingerprint"]  # another tilelang
    assert (rows.loc["tilelang", "variant"], rows.loc["triton", "status"]) == ("tuned", "mismatch")
    assert (rows.loc["torch", "median_ms"], rows.loc["torch", "compile_s"]) == (1.0, 0.5)


def test_a_run_timed_in_rounds_keeps_its_paired_speedup_with_the_interval(tmp_path):
    folder = paths.REPORTS / "20261130-h200-paired-a"  # a committed H200 run, read only

    rows = append_run(folder, tmp_path)
    df = read_history(tmp_path)

    paired = df[df.speedup.notna()]
    assert rows == len(df) == 26 and len(paired) >= 10
    assert ((paired.speedup_lo <= paired.speedup) & (paired.speedup <= paired.speedup_hi)).all()
    assert set(df.run_id) == {"20261130-h200-paired-a"} and set(df.device) == {"h200"}


def test_a_folder_that_is_not_a_run_and_an_unreadable_file_are_named_with_the_fix(tmp_path):
    (tmp_path / "not-a-run").mkdir()
    with pytest.raises(HistoryError, match=r"not-a-run is not a run folder .*opmatrix run") as not_run:
        append_run(tmp_path / "not-a-run", tmp_path / "history")
    hist = tmp_path / "history"
    hist.mkdir()
    (hist / "broken.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(HistoryError, match=r"broken\.parquet is not a readable Parquet file.*history append"):
        read_history(hist)
    with pytest.raises(HistoryError, match=r"no history folder .*opmatrix history append RUN"):
        read_history(tmp_path / "elsewhere")
    assert isinstance(not_run.value, ValueError)


# ------------------------------------------------------------------------------------------------ change points

def test_pure_noise_gives_at_most_one_percent_false_alarms(record_property):
    """A/A: log-normal nights of 2 % sd, 10 to 60 nights; and the hardest length, 10 nights, on its own."""
    rng = np.random.default_rng(20261130)
    mixed = np.mean([bool(change_points(np.exp(rng.normal(0, NOISE, rng.integers(10, 61))))) for _ in range(2000)])
    short = np.mean([bool(change_points(np.exp(rng.normal(0, NOISE, 10)))) for _ in range(2000)])
    record_property("false_alarms_10_to_60_nights", float(mixed))
    record_property("false_alarms_10_nights", float(short))
    print(f"false alarms: {mixed:.2%} over 10-60 nights, {short:.2%} at 10 nights (2000 series each)")
    assert mixed <= 0.01
    assert short <= 0.01


def planted(step: float, rng) -> tuple[list[float], int]:
    """A series of 20 to 60 nights whose level moves by `step` at a random night (at least 2 nights each side)."""
    n = int(rng.integers(20, 61))
    k = int(rng.integers(2, n - 1))
    x = rng.normal(0, NOISE, n)
    x[k:] += np.log1p(step)
    return list(np.exp(x)), k


def detection(step: float, seed: int, series: int = 300) -> tuple[float, float]:
    """The share of planted steps found as the only change point at their exact night, and within ±1 night."""
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(series):
        values, k = planted(step, rng)
        found.append((change_points(values), k))
    exact = np.mean([cps == [k] for cps, k in found])
    near = np.mean([len(cps) == 1 and abs(cps[0] - k) <= 1 for cps, k in found])
    return float(exact), float(near)


@pytest.mark.parametrize("step, exact_at_least", [(0.10, 0.90), (0.30, 0.98)])
def test_a_planted_step_is_found_at_its_night(step, exact_at_least, record_property):
    exact, near = detection(step, seed=int(step * 100))
    record_property(f"found_exact_{step:.0%}", float(exact))
    record_property(f"found_within_1_{step:.0%}", float(near))
    print(f"{step:.0%} step: found at its night in {exact:.1%}, within ±1 night in {near:.1%} (20-60 nights)")
    assert exact >= exact_at_least
    assert near >= exact


def test_a_three_percent_step_is_mostly_missed(record_property):
    """1.5 σ: the power is low and said so (module docstring); it stays well below the 10 % step's."""
    exact, near = detection(0.03, seed=3)
    record_property("found_exact_3%", float(exact))
    print(f"3% step: found at its night in {exact:.1%}, within ±1 night in {near:.1%} (20-60 nights)")
    assert exact < 0.5 * detection(0.10, seed=10)[0]


def test_too_short_or_flat_series_have_no_change_point_and_bad_values_are_refused():
    assert change_points([1.0, 2.0, 2.0]) == []  # fewer than 2 x MIN_NIGHTS
    assert change_points([1.0] * 30) == []
    assert change_points([1.0] * 10 + [2.0] * 10) == [10]  # a flat series' shift, exact although σ is 0
    with pytest.raises(ValueError, match="positive"):
        change_points([1.0, 0.0, 1.0, 1.0])


def test_a_shift_names_its_first_night_its_size_and_what_changed_in_the_toolchain(nightly):
    _, hist = nightly
    df = read_history(hist)

    [tile] = trends(df, filters={"backend": "tilelang[tuned]"})
    [torch] = trends(df, filters={"backend": "torch"})

    [shift] = tile.shifts
    assert (shift.index, shift.night, shift.run_id) == (UPGRADE_NIGHT, night(UPGRADE_NIGHT), "night-08")
    assert shift.changed == "tilelang 0.1.14 → 0.1.15"
    assert shift.ratio == pytest.approx(1.10, abs=0.02)
    assert len(tile.values) == NIGHTS
    assert tile.label() == "gemm_relu · h200 · square_4096 · float16 · tilelang[tuned] · host"
    assert torch.shifts == []  # the same upgrade, no shift: a version change alone is not a change point


def test_two_toolchains_of_one_night_are_two_series_not_one(tmp_path):
    """A nightly that times tl014 beside tl015 (one run, two toolchains, 12 nights): each toolchain is a series of
    its own, one point per night, so tl015's 10 % slower kernel is a level of its own, not a change point that
    alternates night by night between the two toolchains."""
    rng = np.random.default_rng(3)
    for i in range(12):
        store = ResultStore(tmp_path / "reports" / f"n{i:02d}")
        for toolchain, level, tilelang in (("tl014", 1.0, "0.1.14"), ("tl015", 1.1, "0.1.15")):
            store.append(Result(run_id=f"n{i:02d}", cell=f"h200.{toolchain}", device="h200", toolchain=toolchain,
                                kernel="gemm_relu", workload="square_4096", dtype="float16", backend="tilelang",
                                status="ok", median_ms=level * float(np.exp(rng.normal(0, 0.01))),
                                **{**VERSIONS, "tilelang": tilelang}))
        store.write_manifest(RunManifest(run_id=f"n{i:02d}", started_at=night(i), baseline="torch"))
        append_run(tmp_path / "reports" / f"n{i:02d}", tmp_path / "history")

    found = trends(read_history(tmp_path / "history"))

    assert [(t.toolchain, len(t.values), len(set(t.nights)), len(set(t.fingerprints))) for t in found] == [
        ("tl014", 12, 12, 1), ("tl015", 12, 12, 1)]
    assert [t.shifts for t in found] == [[], []]
    assert np.median(found[1].values) / np.median(found[0].values) == pytest.approx(1.10, abs=0.02)
    [only] = trends(read_history(tmp_path / "history"), filters={"toolchain": "tl015"})
    assert only.label().endswith("tilelang · tl015")


# --------------------------------------------------------------------------------------------------- known good

def synthetic_history() -> pd.DataFrame:
    """24 nights of one series per backend. tilelang: 0.1.13 fast; 0.1.14 15 % slower; 0.1.15 fast but one night a
    mismatch; 0.1.16 fast (2 % off the best). torch: flat throughout."""
    rng = np.random.default_rng(11)
    plan = [("0.1.13", 1.00, "ok"), ("0.1.14", 1.15, "ok"), ("0.1.15", 1.00, "ok"), ("0.1.16", 1.02, "ok")]
    rows = []
    for i in range(24):
        tilelang, level, status = plan[i // 6]
        versions = {**VERSIONS, "tilelang": tilelang}
        for backend, ms in (("tilelang", level), ("torch", 2.0)):
            failed = backend == "tilelang" and i == 14
            rows.append({**versions, "run_id": f"n{i:02d}", "night": pd.Timestamp(night(i)), "device": "h200",
                         "kernel": "gemm_relu", "workload": "square_4096", "dtype": "float16", "backend": backend,
                         "variant": "default", "toolchain": "host", "device_name": "NVIDIA H200",
                         "fingerprint": history.fingerprint(versions), "versions": history.versions_text(versions),
                         "status": "mismatch" if failed else status,
                         "median_ms": np.nan if failed else ms * float(np.exp(rng.normal(0, 0.01))),
                         "speedup": np.nan, "speedup_lo": np.nan, "speedup_hi": np.nan, "rel_err": 1e-4,
                         "compile_s": 1.0})
    return pd.DataFrame(rows, columns=COLUMNS)


def test_known_good_versions_are_those_always_ok_and_inside_the_performance_band():
    ranges = known_good(synthetic_history())

    tile = [(r.versions.split("tilelang ")[1].split(",")[0], r.first_night, r.last_night, r.runs) for r in ranges
            if r.backend == "tilelang"]
    assert tile == [("0.1.13", night(0), night(5), 6), ("0.1.16", night(18), night(23), 6)]
    assert len([r for r in ranges if r.backend == "torch"]) == 4  # flat through every upgrade
    assert ranges[0].text().endswith("(2026-12-01 03:00 → 2026-12-06 03:00, 6 run(s))")


# -------------------------------------------------------------------------------------------------- the command

def test_the_command_refuses_an_unknown_filter_naming_the_valid_keys(nightly):
    _, hist = nightly
    with pytest.raises(cli.UsageError, match="unknown filter key 'colour'") as bad_key:
        run_cli("kernel=gemm_relu", "colour=red", "--history", str(hist))
    with pytest.raises(cli.UsageError, match=r"'kernel' is not key=value"):
        run_cli("kernel", "--history", str(hist))
    with pytest.raises(cli.UsageError, match=r"no history folder .*opmatrix history append RUN"):
        run_cli("kernel=gemm_relu", "--history", str(hist.parent / "nowhere"))
    with pytest.raises(cli.UsageError, match=r"no kernel 'gemm' in .*kernels there: gemm_relu"):
        run_cli("kernel=gemm", "--history", str(hist))
    assert all(key in str(bad_key.value) for key in FILTER_KEYS)


def test_the_command_appends_runs_and_prints_each_trend_with_its_change_points(nightly, tmp_path, capsys):
    reports, _ = nightly
    hist = tmp_path / "history"

    assert run_cli("append", *(f"night-{i:02d}" for i in range(NIGHTS)), "--reports", str(reports),
                   "--history", str(hist)) == 0
    appended = capsys.readouterr().out
    assert run_cli("kernel=gemm_relu", "backend=tilelang", "device=h200", "--history", str(hist)) == 0
    text = capsys.readouterr().out
    assert run_cli("backend=tilelang", "--json", "--history", str(hist)) == 0
    [trend] = json.loads(capsys.readouterr().out)

    assert len(list(hist.glob("*.parquet"))) == NIGHTS and "night-15: 2 rows" in appended
    assert "1 series, 1 change point(s)" in text
    assert "| 2026-12-09 03:00 | night-08 | host |" in text and "from here: tilelang 0.1.14 → 0.1.15" in text
    assert [s["night"] for s in trend["shifts"]] == [night(UPGRADE_NIGHT)]
    assert trend["values"] == pytest.approx(read_history(hist).query("backend == 'tilelang'").median_ms.tolist())
