"""Helion builds: the fixed-configuration kernel (`default`) and the autotuned one (`tuned`, Helion's own autotuner,
like TileLang's `tuned`: Option B), and the refusals both share. Used from kernels/<op>/helion.py.

Interpret mode (HELION_INTERPRET=1, set by backends/helion.py on a CPU) runs a kernel's tiles as eager PyTorch
ops; the autotuner times candidates on a GPU, so `tuned` needs one.
"""
from __future__ import annotations

import time

from opmatrix.incell.plugins import Unsupported

EFFORT = "quick"  # Helion's autotuning preset for `tuned` ('quick': a bounded search, minutes not hours)


def choose(fixed, tunable, variant: str, device, example_args):
    """The kernel to call and its config record: `fixed` as it is, or `tunable` tuned once on `example_args()` (the
    autotuner mutates the bound kernel so later calls run its choice)."""
    if variant == "default":
        return fixed, {"config": str(fixed.configs[0]) if fixed.configs else "", "autotuned": False}
    if not device.is_gpu:
        raise Unsupported("Helion's autotuner times candidate configurations on a GPU; interpret mode has none")
    start = time.perf_counter()
    config = tunable.autotune(example_args())
    return tunable, {"config": str(config), "autotuned": True, "effort": EFFORT,
                     "tune_s": round(time.perf_counter() - start, 1)}
