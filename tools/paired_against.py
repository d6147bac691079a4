"""Each contestant of a stored run against another contestant of the same rounds (not the baseline): the
speed-up over cuDNN's or flash SDPA, over cuBLASLt, with the paired bootstrap interval of opmatrix.decide.stats.

    python tools/paired_against.py RUN KERNEL 'torch[cudnn]' ['tilelang[fa3]' ...]

Prints one line per (workload, dtype, contestant): ratio (> 1: faster than the reference) [95 % interval] and the
number of rounds; a contestant not timed in the reference's rounds says so. Used for the NOTES of issue 14's runs."""
from __future__ import annotations

import sys

from opmatrix import paths
from opmatrix.core.result import backend_labels
from opmatrix.decide import stats
from opmatrix.store import load_run, run_dir


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    run, kernel, reference, *only = argv
    df = load_run(run_dir(run, paths.REPORTS))
    df = df[(df.kernel == kernel) & (df.status == "ok")]
    df = df.assign(label=backend_labels(df))
    for (workload, dtype), group in df.groupby(["workload", "dtype"], sort=True):
        ref = group[group.label == reference]
        if ref.empty:
            print(f"{workload} {dtype}: no {reference} row")
            continue
        for row in group.itertuples():
            if row.label == reference or (only and row.label not in only):
                continue
            interval = stats.against(row, ref.iloc[0])
            text = f"{interval.text()} ({interval.samples} rounds)" if interval else "not timed in the same rounds"
            print(f"{workload:28} {dtype:9} {row.label:18} vs {reference}: {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
