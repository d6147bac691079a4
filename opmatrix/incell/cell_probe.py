"""The cell's own measurements, once per cell, in one process of the cell's environment (one import of the
framework instead of two; forked from the cell's fork server, which has imported it already, where there is one):
the environment facts every row carries (opmatrix.incell.facts) and, for a cell that
runs on its device, the device's ceilings (opmatrix.incell.ceilings). A failing ceiling measurement costs only the
ceilings: the facts are written first.

    python -m opmatrix.incell.cell_probe OUT VENDOR [DTYPE...]     (no dtypes: facts only)
Writes {"facts": {...}, "ceilings": {...} | {}} to OUT. Stdlib only at import."""
from __future__ import annotations

import json
import sys
import traceback

from opmatrix.incell import ceilings, facts


def main(argv: list[str]) -> int:
    out, vendor, dtypes = argv[0], argv[1], argv[2:]
    result = {"facts": facts.probe(vendor), "ceilings": {}}
    with open(out, "w") as fh:
        json.dump(result, fh)
    if not dtypes:
        return 0
    try:
        result["ceilings"] = ceilings.measure_ceilings("cpu" if vendor == "cpu" else "cuda", dtypes)
    except Exception:
        traceback.print_exc()  # into the probe's log; the rows simply carry no ceilings
        return 0
    with open(out, "w") as fh:
        json.dump(result, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
