"""What sets the A/A noise floor? For every baseline row timed in rounds with its A/A twin, in the runs given (or
every committed run): the workload's call time, whether the call is device- or launch-bound (the report's rule: a
roofline bound under 5 µs leaves host-side time), calls per burst, how far one round's twin/baseline ratio strays
(opmatrix.decide.stats.per_round_spread), the rounds taken and the floor reached (the report's half-width).

    python tools/aa_noise.py [RUN ...] [--min-ms 0.1]
    python tools/aa_noise.py RUN ... --by-distance KERNEL

--by-distance: does a contestant timed next to the baseline in a round pair better than one timed far from it?
For every contestant of KERNEL, how far one round's ratio to the baseline strays from the contestant's median,
by how many slots apart the two bursts were (the stored round positions).

Used for the NOTES of issue 9 (goal: A/A half-width <= 1 % for calls >= 0.1 ms): the floor is the per-round spread
narrowed by the rounds, and the spread depends on how long a burst is under the power cap."""
from __future__ import annotations

import argparse
import math
from collections import defaultdict

from opmatrix import paths
from opmatrix.decide import stats
from opmatrix.report.performance import launch_bound
from opmatrix.store import RESULTS_JSONL, load_run


def rows(run: str, min_ms: float):
    df = load_run(run)
    twins = df[(df.status == "ok") & stats.twinned_baselines(df) & (df.median_ms >= min_ms)]
    for r in twins.itertuples():
        ratios = stats.ratios(r.aa_round_ms, r.round_ms)
        floor = stats.median_interval(ratios)
        spread = stats.per_round_spread(ratios)
        if floor is None or spread is None:
            continue
        calls = len(r.samples_ms) / len(r.round_ms)
        launch = launch_bound(r._asdict())  # host-side time, as the report says
        yield (r.kernel, r.workload, r.dtype, run, r.median_ms, "launch" if launch else "device", calls,
               len(r.round_ms), spread, floor.halfwidth)


DISTANCES = ((1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 10 ** 6))


def by_distance(runs: list[str], kernel: str) -> dict[tuple[int, int], list[float]]:
    """Slots apart (bucketed) -> every per-round log-ratio deviation from its contestant's median log ratio."""
    out = defaultdict(list)
    for run in runs:
        df = load_run(run)
        df = df[(df.status == "ok") & (df.kernel == kernel) & (df.pairing.fillna("") != "")]
        for _, group in df.groupby("round_group"):
            base = group[group.baseline_round_ms.map(len).eq(0)]
            if base.empty:
                continue
            b = base.iloc[0]
            for r in group[group.baseline_round_ms.map(len).gt(0)].itertuples():
                mine_ms, base_ms = stats.shared_rounds(r, b)  # a contestant that left the extra rounds: its first
                if not mine_ms or len(r.round_position) < len(mine_ms):
                    continue
                logs = [math.log(x) for x in stats.ratios(mine_ms, base_ms)]
                centre = sorted(logs)[len(logs) // 2]
                for mine, theirs, value in zip(r.round_position, b.round_position, logs):
                    apart = abs(mine - theirs)
                    bucket = next(d for d in DISTANCES if d[0] <= apart <= d[1])
                    out[bucket].append(value - centre)
    return out


def print_by_distance(runs: list[str], kernel: str) -> None:
    from scipy.stats import median_abs_deviation

    print(f"{kernel}: slots apart in a round -> how far one round's ratio strays (normal-consistent MAD), rounds")
    for bucket, values in sorted(by_distance(runs, kernel).items()):
        label = f"{bucket[0]}" if bucket[0] == bucket[1] else f"{bucket[0]}+" if bucket[1] > 1000 else \
            f"{bucket[0]}-{bucket[1]}"
        print(f"  {label:>5}: ±{100 * math.expm1(median_abs_deviation(values, scale='normal')):.2f}%  "
              f"({len(values)} rounds)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", help="run ids or folders (default: every committed run)")
    parser.add_argument("--by-distance", metavar="KERNEL", help="spread of a contestant's per-round ratio by how many "
                        "slots apart it and the baseline were timed")
    parser.add_argument("--min-ms", type=float, default=0.1, help="leave out calls shorter than this (default 0.1)")
    args = parser.parse_args(argv)
    runs = args.runs or sorted(p.name for p in paths.REPORTS.iterdir() if (p / RESULTS_JSONL).is_file())
    if args.by_distance:
        print_by_distance(runs, args.by_distance)
        return 0
    table = sorted(row for run in runs for row in rows(run, args.min_ms))
    print(f"{'kernel':16} {'workload':26} {'dtype':9} {'run':32} {'call ms':>8} {'bound':6} {'calls/burst':>11} "
          f"{'rounds':>6} {'one round':>9} {'floor':>7}")
    for kernel, workload, dtype, run, ms, bound, calls, rounds, spread, floor in table:
        print(f"{kernel:16} {workload:26} {dtype:9} {run:32} {ms:8.3f} {bound:6} {calls:11.1f} {rounds:6d} "
              f"{100 * spread:8.2f}% {100 * floor:6.2f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
