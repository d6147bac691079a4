"""Each memory-bound row of a stored run as a share of its cell's measured copy ceiling, per round: the median
share over the row's rounds (each round's GB/s as the row's own: opmatrix.core.metrics.rate_gbps) with the bootstrap
interval of opmatrix.decide.stats (the report prints the median alone, rounded to a percent).

    python tools/share_of_ceiling.py RUN KERNEL ['tilelang[two_rows]' ...]

Prints one line per (workload, dtype, contestant): GB/s (median), share % [95 % interval] of the ceiling, the
number of rounds and the ceiling. The ceiling is one measurement per cell (a 2 GiB device-to-device copy): its own
variation between cells is not in the interval. Issue 14's rmsnorm goal (>= 92 % of copy bandwidth):
reports/20261201-h200-rmsnorm-tilelang/NOTES.md."""
from __future__ import annotations

import sys

from opmatrix import paths
from opmatrix.core.metrics import rate_gbps
from opmatrix.core.result import backend_labels
from opmatrix.decide import stats
from opmatrix.store import load_run, run_dir


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    run, kernel, *only = argv
    df = load_run(run_dir(run, paths.REPORTS))
    df = df[(df.kernel == kernel) & (df.status == "ok")]
    if df.empty:
        print(f"{run}: no ok rows of {kernel}", file=sys.stderr)
        return 2
    df = df.assign(label=backend_labels(df))
    for row in df.sort_values(["workload", "dtype", "label"]).itertuples():
        if only and row.label not in only:
            continue
        rounds = list(row.round_ms) if row.round_ms is not None else []
        shares = [100 * rate_gbps(row.min_bytes, ms) / row.ceiling_gbps for ms in rounds if ms > 0]
        interval = stats.median_interval(shares)
        text = (f"{interval.estimate:.1f} % [{interval.lo:.1f}, {interval.hi:.1f}] of {row.ceiling_gbps:.0f} GB/s "
                f"({interval.samples} rounds)" if interval
                else f"{100 * row.gbps / row.ceiling_gbps:.1f} % of {row.ceiling_gbps:.0f} GB/s (no rounds)")
        print(f"{row.workload:12} {row.dtype:9} {row.label:20} {row.gbps:6.0f} GB/s  {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
