"""ptxas' resource report (`ptxas -v`, `--ptxas-options=--verbose`): the registers a kernel uses, the bytes it
spills and whether ptxas serialised its wgmmas, as a compile-only row names them (CUTLASS builds, TileLang
builds). Stdlib only."""
from __future__ import annotations

import re

_USED = re.compile(r"Used (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
# "(C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to ...": ptxas waits for
# every wgmma right after issuing it, so a kernel written to overlap them (FA3's softmax under P V) runs in sequence
_WGMMA_SERIALIZED = "wgmma.mma_async instructions are serialized"


def resources(report: str) -> dict:
    """The most registers any kernel of a ptxas -v report uses and the most bytes it spills (stores + loads):
    {"registers": N, "spill_bytes": M}, plus "wgmma_serialized": True when ptxas serialised wgmmas; {} when the
    report names no kernel."""
    registers = [int(n) for n in _USED.findall(report)]
    spills = [int(a) + int(b) for a, b in _SPILL.findall(report)]
    if not registers:
        return {}
    found = {"registers": max(registers), "spill_bytes": max(spills, default=0)}
    if _WGMMA_SERIALIZED in report:
        found["wgmma_serialized"] = True
    return found


def text(found: dict) -> str:
    """", 168 registers, no spills" (or "..., 64 bytes spilled"): for a row's description; "" without a report."""
    if not found:
        return ""
    spills = f"{found['spill_bytes']} bytes spilled" if found["spill_bytes"] else "no spills"
    serialized = ", wgmma serialised by ptxas (C7514)" if found.get("wgmma_serialized") else ""
    return f", {found['registers']} registers, {spills}{serialized}"
