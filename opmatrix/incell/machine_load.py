"""The machine's load from outside the cell, round by round: how many cores other processes kept busy while a round
was timed. The kernel's count of busy CPU time (/proc/stat: every state but idle and iowait) less the CPU time of
this cell runner's own process tree (the judge and every worker it started, opmatrix.incell.integrity.
process_cpu_s): what is left is another process's, a busy machine the rows' times shared. Where /proc/stat cannot
be read (not Linux), nothing is recorded. Stdlib only."""
from __future__ import annotations

import os
import time

from opmatrix.incell.integrity import process_cpu_s

try:
    TICKS_PER_S = os.sysconf("SC_CLK_TCK")
except (ValueError, OSError, AttributeError):
    TICKS_PER_S = 100


def busy_cpu_s() -> float | None:
    """CPU seconds every core of the machine spent busy since boot (None where /proc/stat cannot be read)."""
    try:
        with open("/proc/stat") as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 5:
        return None
    ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks) - idle) / TICKS_PER_S


class OthersMeter:
    """Cores other processes kept busy between start() and stop()."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.begun: tuple[float, float, float] | None = None

    def _now(self) -> tuple[float, float, float] | None:
        busy, own = busy_cpu_s(), process_cpu_s(self.pid)
        return None if busy is None or own is None else (time.monotonic(), busy, own)

    def start(self) -> None:
        self.begun = self._now()

    def stop(self) -> float | None:
        """The other processes' cores over the span (None where it could not be read, or too short to tell)."""
        end = self._now()
        if self.begun is None or end is None:
            return None
        wall = end[0] - self.begun[0]
        if wall < 5.0 / TICKS_PER_S:  # shorter than a few ticks of the kernel's count: nothing to tell
            return None
        others = (end[1] - self.begun[1]) - (end[2] - self.begun[2])
        return round(max(0.0, others) / wall, 3)
