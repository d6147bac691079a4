"""What happens to a cell, whichever scheduler runs it: on a host with its device it runs; for a device no host has
it is built on a CPU host for that device (compile-only) when it can be; otherwise every job is a `no_host` row at
once, so nothing disappears silently. Pure functions: the local and Ray schedulers both decide here."""
from __future__ import annotations

from typing import Iterator

from opmatrix.core import status
from opmatrix.core.jobs import CellPlan, Mode
from opmatrix.core.result import Result


class SchedulerError(Exception):
    """A scheduler cannot start: a cluster address that does not answer, say. The message says what to do."""


def compile_plan(plan: CellPlan) -> CellPlan | None:
    """The compile-only version of a cell whose device no host has, or None when it cannot have one: compile-only
    is off, the arch is 'auto' (nothing to build for), or the toolchain is a host image's own packages
    (`system = true`: with no host of that device there is no such image here to build with)."""
    cell = plan.cell
    if not plan.settings.compile_only or cell.device.arch == "auto" or cell.toolchain.system:
        return None
    return plan.replace(mode=Mode.COMPILE)


def no_host_reason(plan: CellPlan, where: str, who: str = "no host of this run") -> str:
    why = f"{who} offers device {plan.cell.device.id!r} ({plan.cell.device.describe()}); {where}"
    if plan.settings.compile_only and plan.cell.toolchain.system and plan.cell.device.arch != "auto":
        why += ("; no compile-only build either: toolchain "
                f"{plan.cell.toolchain.name!r} is a host image's own packages (system = true)")
    return why


def no_host_rows(plan: CellPlan, why: str) -> Iterator[Result]:
    for job in plan.jobs:
        yield plan.row(job, status.NO_HOST, why)


def device_env(vendor: str, index: str) -> dict:
    """The variable that gives a cell one GPU of a local host."""
    var = {"nvidia": "CUDA_VISIBLE_DEVICES", "amd": "HIP_VISIBLE_DEVICES"}.get(vendor)
    return {var: index} if var else {}
