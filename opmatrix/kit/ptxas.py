"""ptxas' resource report (`ptxas -v`, `--ptxas-options=--verbose`): the registers a kernel uses and the bytes it
spills, as a compile-only row names them (CUTLASS builds, TileLang builds). Stdlib only."""
from __future__ import annotations

import re

_USED = re.compile(r"Used (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def resources(report: str) -> dict:
    """The most registers any kernel of a ptxas -v report uses and the most bytes it spills (stores + loads):
    {"registers": N, "spill_bytes": M}, or {} when the report names none."""
    registers = [int(n) for n in _USED.findall(report)]
    spills = [int(a) + int(b) for a, b in _SPILL.findall(report)]
    if not registers:
        return {}
    return {"registers": max(registers), "spill_bytes": max(spills, default=0)}


def text(found: dict) -> str:
    """", 168 registers, no spills" (or "..., 64 bytes spilled"): for a row's description; "" without a report."""
    if not found:
        return ""
    spills = f"{found['spill_bytes']} bytes spilled" if found["spill_bytes"] else "no spills"
    return f", {found['registers']} registers, {spills}"
