"""How long do the per-row statistics take on a large run? Builds N synthetic rows timed in rounds (a baseline
with its A/A twin and contestants per round group, ~20 rounds each, a few round counts) and times
opmatrix.decide.stats.add_paired_columns on them; prints rows, seconds and peak memory (issue 28's performance
duty: 200,000 rows in <= 20 s).

    python lab/bench_stats.py [--rows 200000] [--rounds 20] [--seed 1]"""
from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import pandas as pd

from opmatrix.decide import stats

PER_GROUP = 5  # the baseline and four contestants share one round group


def synthetic(rows: int, rounds: int, seed: int) -> pd.DataFrame:
    """`rows` paired rows: groups of PER_GROUP, each group's round count rounds-2 .. rounds+2."""
    rng = np.random.default_rng(seed)
    records = []
    for g in range(rows // PER_GROUP):
        n = rounds + int(rng.integers(-2, 3))
        drift = np.exp(rng.normal(0, 0.05, n))
        base = (drift * np.exp(rng.normal(0, 0.01, n))).tolist()
        twin = (drift * np.exp(rng.normal(0, 0.01, n))).tolist()
        for k in range(PER_GROUP):
            own = base if k == 0 else (drift / (1 + 0.1 * k) * np.exp(rng.normal(0, 0.01, n))).tolist()
            records.append({"run_id": f"r{g % 4}", "cell": "h200.host", "device": "h200", "kernel": f"k{g % 7}",
                            "workload": f"w{g}", "dtype": "float16", "backend": f"b{k}", "round_group": f"g{g}",
                            "status": "ok", "pairing": "interleaved", "round_ms": own,
                            "baseline_round_ms": [] if k == 0 else base, "aa_round_ms": twin, "build_round_ms": [],
                            "samples_ms": own})
    return pd.DataFrame(records)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    df = synthetic(args.rows, args.rounds, args.seed)
    stats.median_interval([1.0, 1.1, 0.9])  # scipy imported outside the timing
    start, cpu = time.perf_counter(), time.process_time()
    out = stats.add_paired_columns(df)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"add_paired_columns: {len(out)} rows, {seconds:.1f} s wall, {cpu:.1f} s CPU, peak RSS {peak:.0f} MiB, "
          f"{int(out.speedup_lo.notna().sum())} intervals")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
