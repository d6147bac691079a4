"""The cell's own measurements, once per cell, in one process of the cell's environment (one import of the
framework instead of two; forked from the cell's fork server, which has imported it already, where there is one):
the environment facts every row carries (opmatrix.incell.facts) and, for a cell that
runs on its device, the device's ceilings (opmatrix.incell.ceilings), or those an earlier cell on this host measured
within the last KEPT_H hours (opmatrix.incell.kept_ceilings; 0: measured here). A failing ceiling measurement costs
only the ceilings: the facts are written first.

    python -m opmatrix.incell.cell_probe OUT VENDOR KEPT_H [DTYPE...]     (no dtypes: facts only)
Writes {"facts": {...}, "ceilings": {...} | {}} to OUT. Stdlib only at import."""
from __future__ import annotations

import json
import sys
import traceback

from opmatrix.incell import ceilings, facts, kept_ceilings


def main(argv: list[str]) -> int:
    out, vendor, kept_h, dtypes = argv[0], argv[1], float(argv[2]), argv[3:]
    result = {"facts": facts.probe(vendor), "ceilings": {}}
    with open(out, "w") as fh:
        json.dump(result, fh)
    if not dtypes:
        return 0
    try:
        result["ceilings"] = _ceilings(vendor, result["facts"], kept_h, dtypes)
    except Exception:
        traceback.print_exc()  # into the probe's log; the rows simply carry no ceilings
        return 0
    with open(out, "w") as fh:
        json.dump(result, fh)
    return 0


def _ceilings(vendor: str, cell_facts: dict, kept_h: float, dtypes: list[str]) -> dict:
    """This host's kept ceilings where fresh enough, else measured now (and kept)."""
    import torch

    torch_device = "cpu" if vendor == "cpu" else "cuda"
    threads = torch.get_num_threads() if torch_device == "cpu" else 0
    where, name = kept_ceilings.folder(), kept_ceilings.key(vendor, cell_facts, threads, dtypes)
    kept = kept_ceilings.load(where, name, kept_h)
    if kept is not None:
        return kept
    measured = ceilings.measure_ceilings(torch_device, dtypes)
    kept_ceilings.store(where, name, measured, kept_h)
    return measured


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
