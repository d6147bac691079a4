"""Do two identical runs agree? For every row that is `ok` in both (the baseline's own rows left out): do the
paired speed-up intervals of run A and run B overlap? Prints "N of M agree" and each row where they do not.

    python tools/runs_agree.py RUN_A RUN_B

The intervals are the report's (opmatrix.decide.stats: bootstrap over rounds, widened over builds when
[run] builds >= 2). Used for the NOTES of issue 9's pairs of identical runs."""
from __future__ import annotations

import sys

from opmatrix.core.result import backend_label
from opmatrix.decide import stats
from opmatrix.store import load_run


def intervals(run: str) -> dict[tuple, tuple[float, float, float]]:
    """(kernel, workload, dtype, backend[variant]) -> (speed-up, lo, hi) of every ok row with an interval."""
    df = stats.add_paired_columns(load_run(run))
    df = df[(df.status == "ok") & df.speedup_lo.notna()]
    return {(r.kernel, r.workload, r.dtype, backend_label(r.backend, r.variant)):
            (r.speedup, r.speedup_lo, r.speedup_hi)
            for r in df.itertuples() if len(r.baseline_round_ms)}  # the baseline is not paired with itself


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    a, b = intervals(argv[0]), intervals(argv[1])
    both = sorted(set(a) & set(b))
    apart = [k for k in both if a[k][1] > b[k][2] or b[k][1] > a[k][2]]
    print(f"{len(both) - len(apart)} of {len(both)} speed-ups agree within their intervals "
          f"({len(set(a) ^ set(b))} rows in one run only)")
    for k in apart:
        print(" ".join(k), "A {:.3f} [{:.3f}, {:.3f}]".format(*a[k]), "B {:.3f} [{:.3f}, {:.3f}]".format(*b[k]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
