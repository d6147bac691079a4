"""The local scheduler: the cells of this host, one after another, without Ray (`opmatrix run --no-ray`)."""
from __future__ import annotations

import functools
from typing import Iterator

from opmatrix.cellenv.launch import run_cell_in_env
from opmatrix.core.jobs import CellPlan
from opmatrix.core.result import Result
from opmatrix.scheduling import hosts
from opmatrix.scheduling.dispatch import compile_plan, device_env, no_host_reason, no_host_rows


class LocalScheduler:
    def __enter__(self) -> LocalScheduler:
        self.local = hosts.detect_local()
        return self

    def __exit__(self, *exc) -> None:
        pass

    def describe(self) -> str:
        return "this host, no Ray: " + "; ".join(f"{h.vendor} {h.name} ({h.arch})" for h in self.local)

    def run(self, plans: list[CellPlan], matrix_devices: list, progress) -> Iterator[Result]:
        assigned = hosts.resolve(matrix_devices, self.local)
        for plan in plans:
            if plan.past_deadline():
                return
            cell = plan.cell.id
            candidates = assigned.get(plan.cell.device.id)
            compile_only = compile_plan(plan) if not candidates else None
            working = functools.partial(progress.working, cell)  # what the cell does between its results
            if compile_only:
                progress.started(cell, "this host, compile only")
                yield from run_cell_in_env(compile_only, on_now=working)
            elif not candidates:
                yield from no_host_rows(plan, no_host_reason(plan, self.describe()))
            else:
                gpu = candidates[0]
                progress.started(cell, "this host" + (f" gpu {gpu.index}" if gpu.index else ""))
                yield from run_cell_in_env(plan.replace(gpu_index=gpu.index), device_env(gpu.vendor, gpu.index),
                                           working)
            progress.finished(cell)
