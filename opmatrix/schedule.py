"""Scheduling cells onto the devices of this host, in order. A cell whose device this host lacks gets a
`no_host` row per job at once: nothing is silently dropped and nothing waits."""
from __future__ import annotations

from typing import Iterator

from opmatrix import status
from opmatrix.env import cell_result, run_cell_in_env
from opmatrix.hosts import HostDevice
from opmatrix.result import Result

VISIBLE_DEVICES = {"nvidia": "CUDA_VISIBLE_DEVICES", "amd": "HIP_VISIBLE_DEVICES"}


def no_host_results(plan: dict, why: str) -> Iterator[Result]:
    for job in plan["jobs"]:
        yield cell_result(plan, job, status.NO_HOST, why)


def device_env(host_device: HostDevice) -> dict:
    var = VISIBLE_DEVICES.get(host_device.vendor)
    return {var: host_device.index} if var else {}


def run_local(plans: list[dict], assigned: dict[str, list[HostDevice]], host_summary: str) -> Iterator[Result]:
    for plan in plans:
        device = plan["cell"]["device"]
        candidates = assigned.get(device["id"])
        if not candidates:
            yield from no_host_results(plan, f"no host of this run offers device {device['id']!r} "
                                             f"({device['vendor']} {device['arch']}, name ~ /{device['name']}/); "
                                             f"this host has: {host_summary}")
            continue
        chosen = candidates[0]
        plan["gpu_index"] = chosen.index
        yield from run_cell_in_env(plan, device_env(chosen))
