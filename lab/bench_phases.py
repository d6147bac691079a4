"""The phase breakdown of one stored run, for lab/bench_first_run.sh: per cell, its rows by status, how many came
from the compile-only cache, and where its time went (building: compile_s; timing: the rounds, counted once per
group of rows timed together; the rest of its jobs' time: worker start-up, framework imports, correctness), with
the run's wall time outside the cells (scheduler and report).

    python lab/bench_phases.py RUN_FOLDER [WALL_S]
"""
import json
import sys
from pathlib import Path

import pandas as pd


def main(folder: Path, wall: float | None) -> None:
    manifest = json.loads((folder / "run.json").read_text())
    rows = pd.read_parquet(folder / "results.parquet")
    cells_wall = manifest.get("cells_wall_s") or 0.0
    print(f"{folder.name}: {len(rows)} rows; cells {cells_wall:.1f} s"
          + (f" of {wall:.1f} s wall (start-up, scheduler and report: {wall - cells_wall:.1f} s)" if wall else ""))
    for column in ("rounds_s", "round_group", "compile_cache", "compile_s", "duration_s"):  # older runs lack some
        if column not in rows:
            rows[column] = None
    cached = rows.compile_cache.fillna("").str.startswith("cached from")
    timed = rows.dropna(subset=["rounds_s"])
    rounds = timed.groupby(["cell", "round_group"]).rounds_s.max().groupby("cell").sum() if len(timed) else {}
    print(f"  {'cell':<20} {'rows':>5} {'cached':>6} {'jobs s':>7} {'build s':>7} {'rounds s':>8}  statuses")
    for cell, part in rows.groupby("cell", sort=True):
        counts = ", ".join(f"{s} {n}" for s, n in part.status.value_counts().sort_index().items())
        print(f"  {cell:<20} {len(part):>5} {int(cached[part.index].sum()):>6} {part.duration_s.fillna(0).sum():>7.1f} "
              f"{part.compile_s.fillna(0)[~cached[part.index]].sum():>7.1f} {rounds.get(cell, 0.0):>8.1f}  {counts}")
    print("  jobs s: the jobs' own time added up (cells run side by side, so it can exceed the wall); build s: "
          "compile time of rows built in this run; rounds s: paired timing")


if __name__ == "__main__":
    main(Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else None)
