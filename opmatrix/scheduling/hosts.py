"""What devices this host has, and which matrix devices they satisfy. No torch: the driver's own libraries.

NVIDIA GPUs are read through NVML (nvidia-ml-py, the `gpu` extra), with nvidia-smi as the fallback where NVML is
not importable; AMD GPUs with rocm-smi (where installed); the CPU is always there.
A host GPU goes to every matrix device whose vendor, arch and name pattern it matches; devices marked
`fallback` (e.g. "the local GPU, whatever it is") get it only when no other device claims it.
"""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass

from opmatrix.incell.facts import _cpu_name


@dataclass(frozen=True)
class HostDevice:
    vendor: str
    index: str  # GPU index on the host ("" for the CPU)
    name: str
    arch: str


def _run(args: list[str]) -> str:
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout if out.returncode == 0 else ""


def _nvml_gpus() -> list[HostDevice] | None:
    """NVIDIA GPUs through NVML, or None when NVML cannot be used here (no library, no driver)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            gpus.append(HostDevice("nvidia", str(index), name.decode() if isinstance(name, bytes) else name,
                                   f"sm_{major}{minor}"))
        return gpus
    except Exception:
        return None
    finally:
        pynvml.nvmlShutdown()


def nvidia_gpus() -> list[HostDevice]:
    gpus = _nvml_gpus()
    if gpus is not None:
        return gpus
    if not shutil.which("nvidia-smi"):
        return []
    text = _run(["nvidia-smi", "--query-gpu=index,name,compute_cap", "--format=csv,noheader"])
    gpus = []
    for line in text.strip().splitlines():
        index, name, cap = [part.strip() for part in line.split(",")]
        gpus.append(HostDevice("nvidia", index, name, "sm_" + cap.replace(".", "")))
    return gpus


def amd_gpus() -> list[HostDevice]:
    if not shutil.which("rocm-smi"):
        return []
    try:
        cards = json.loads(_run(["rocm-smi", "--showproductname", "--json"]) or "{}")
    except json.JSONDecodeError:
        return []
    gpus = []
    for key, info in sorted(cards.items()):
        if not key.startswith("card"):
            continue
        name = info.get("Card Series") or info.get("Card SKU") or info.get("Card Model", "")
        arch = info.get("GFX Version", "")
        gpus.append(HostDevice("amd", key.removeprefix("card"), name, arch))
    return gpus


VISIBLE_DEVICES_VARS = {"nvidia": "CUDA_VISIBLE_DEVICES", "amd": "HIP_VISIBLE_DEVICES"}


def visible(gpus: list[HostDevice], environ: dict) -> list[HostDevice]:
    """The GPUs this process was given: a host with several GPUs can run one opmatrix per GPU by setting
    CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES to host indices (e.g. "1" or "0,2"), as for any CUDA program.
    Unset: all of them. Set to something other than host indices (UUIDs): all of them, as the driver decides."""
    kept = []
    for gpu in gpus:
        value = environ.get(VISIBLE_DEVICES_VARS[gpu.vendor])
        indices = [part.strip() for part in value.split(",")] if value is not None else None
        if indices is None or not all(part.isdigit() for part in indices if part) or gpu.index in indices:
            kept.append(gpu)
    return kept


def detect_local() -> list[HostDevice]:
    gpus = visible(nvidia_gpus() + amd_gpus(), dict(os.environ))
    return [HostDevice("cpu", "", _cpu_name(), platform.machine())] + gpus


def _matches(device, host: HostDevice) -> bool:
    if device.vendor != host.vendor:
        return False
    if device.arch not in ("auto", host.arch) and host.vendor != "cpu":
        return False
    return re.search(device.name, host.name, re.IGNORECASE) is not None


def resolve(devices: list, host: list[HostDevice]) -> dict[str, list[HostDevice]]:
    """Matrix device id -> the host devices that satisfy it (absent: no host device does)."""
    assigned: dict[str, list[HostDevice]] = {}
    for hd in host:
        matching = [d for d in devices if _matches(d, hd)]
        specific = [d for d in matching if not d.fallback]
        for d in specific or matching:
            assigned.setdefault(d.id, []).append(hd)
    return assigned
