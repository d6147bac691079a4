"""What happens to a cell, whichever scheduler runs it: on a host with its device it runs; for a device no host has
it is built on a CPU host for that device (compile-only) when it can be; otherwise every job is a `no_host` row at
once, so nothing disappears silently. Pure functions: the local and Ray schedulers both decide here."""
from __future__ import annotations

from typing import Iterator

from opmatrix.core import status
from opmatrix.core.jobs import CellPlan, Mode
from opmatrix.core.result import Result
from opmatrix.scheduling import hosts


class SchedulerError(Exception):
    """A scheduler cannot start: a cluster address that does not answer, say. The message says what to do."""


def compile_plan(plan: CellPlan) -> CellPlan | None:
    """The compile-only version of a cell whose device no host has, or None when it cannot have one: compile-only
    is off, or the arch is 'auto' (nothing to build for). It is built in the cell's toolchain on a CPU host."""
    if not plan.settings.compile_only or plan.cell.device.arch == "auto":
        return None
    return plan.replace(mode=Mode.COMPILE)


def no_host_reason(plan: CellPlan, where: str, who: str = "no host of this run") -> str:
    return f"{who} offers device {plan.cell.device.id!r} ({plan.cell.device.describe()}); {where}"


def no_host_rows(plan: CellPlan, why: str) -> Iterator[Result]:
    for job in plan.all_jobs():
        yield plan.row(job, status.NO_HOST, why)


def device_env(vendor: str, index: str) -> dict:
    """The variable that gives a cell one GPU of a local host."""
    var = hosts.VISIBLE_DEVICES_VARS.get(vendor)
    return {var: index} if var else {}
