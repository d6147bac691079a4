"""The local scheduler: the cells of this host, one after another, without Ray (`opmatrix run --no-ray`).
A cell whose device this host lacks gets a `no_host` row per job at once: nothing is silently dropped."""
from __future__ import annotations

from typing import Iterator

from opmatrix.core import status
from opmatrix.scheduling import hosts
from opmatrix.incell.cell_runner import past_deadline
from opmatrix.cellenv.launch import cell_result, run_cell_in_env
from opmatrix.scheduling.hosts import HostDevice
from opmatrix.core.result import Result

VISIBLE_DEVICES = {"nvidia": "CUDA_VISIBLE_DEVICES", "amd": "HIP_VISIBLE_DEVICES"}


def no_host_results(plan: dict, why: str) -> Iterator[Result]:
    for job in plan["jobs"]:
        yield cell_result(plan, job, status.NO_HOST, why)


def compile_plan(plan: dict) -> dict | None:
    """The compile-only version of a cell whose device no host has, if it can have one (a known arch)."""
    if not plan["settings"].get("compile_only", True) or plan["cell"]["device"]["arch"] == "auto":
        return None
    return dict(plan, mode="compile")


def device_env(host_device: HostDevice) -> dict:
    var = VISIBLE_DEVICES.get(host_device.vendor)
    return {var: host_device.index} if var else {}


class LocalScheduler:
    def __enter__(self) -> LocalScheduler:
        self.local = hosts.detect_local()
        return self

    def __exit__(self, *exc) -> None:
        pass

    def describe(self) -> str:
        return "this host, no Ray: " + "; ".join(f"{h.vendor} {h.name} ({h.arch})" for h in self.local)

    def run(self, plans: list[dict], matrix_devices: list, progress) -> Iterator[Result]:
        assigned = hosts.resolve(matrix_devices, self.local)
        for plan in plans:
            if past_deadline(plan):
                return
            device, cell = plan["cell"]["device"], plan["cell"]["id"]
            candidates = assigned.get(device["id"])
            compile_only = compile_plan(plan) if not candidates else None
            if compile_only:
                progress.started(cell, "this host, compile only")
                yield from run_cell_in_env(compile_only)
            elif not candidates:
                yield from no_host_results(plan, f"no host of this run offers device {device['id']!r} "
                                                 f"({hosts.describe_device_dict(device)}); {self.describe()}")
            else:
                plan["gpu_index"] = candidates[0].index
                progress.started(cell, "this host" + (f" gpu {candidates[0].index}" if candidates[0].index else ""))
                yield from run_cell_in_env(plan, device_env(candidates[0]))
            progress.finished(cell)
