"""What devices this host has, and which matrix devices they satisfy. No torch: the driver's own libraries.

NVIDIA GPUs are read through NVML (nvidia-ml-py, the `gpu` extra), with nvidia-smi as the fallback where NVML is
not importable; AMD GPUs with rocm-smi (where installed); the CPU is always there.
A host GPU goes to every matrix device whose vendor, arch and name pattern it matches and whose driver / runtime
ranges hold the host's facts (opmatrix.scheduling.host_facts); devices marked `fallback` (e.g. "the local GPU,
whatever it is") get it only when no other device claims it.
"""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import re
import shutil
import socket
import subprocess
from dataclasses import dataclass

from opmatrix.incell.facts import _cpu_name, _nvidia_driver
from opmatrix.scheduling import host_facts


@dataclass(frozen=True)
class HostDevice:
    vendor: str
    index: str  # GPU index on the host ("" for the CPU)
    name: str
    arch: str
    driver: str = ""  # the GPU driver's version ("" for the CPU or when the probe found none)
    runtime: str = ""  # the CUDA / ROCm version that driver offers
    host: str = ""  # the host's name (what a device's `host` pattern is matched against)


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
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()  # 13000 for CUDA 13.0
        return [dataclasses.replace(g, runtime=f"{cuda // 1000}.{cuda % 1000 // 10}") for g in gpus]
    except Exception:
        return None
    finally:
        pynvml.nvmlShutdown()


def nvidia_gpus() -> list[HostDevice]:
    """The NVIDIA GPUs with the host's driver version and the CUDA version that driver offers."""
    gpus = _nvml_gpus()
    if gpus is None:
        gpus = _smi_gpus()
    driver = _nvidia_driver() if gpus else ""
    return [dataclasses.replace(g, driver=driver) for g in gpus]


def _smi_gpus() -> list[HostDevice]:
    if not shutil.which("nvidia-smi"):
        return []
    text = _run(["nvidia-smi", "--query-gpu=index,name,compute_cap", "--format=csv,noheader"])
    cuda = re.search(r"CUDA Version:\s*([0-9.]+)", _run(["nvidia-smi"]))
    gpus = []
    for line in text.strip().splitlines():
        index, name, cap = [part.strip() for part in line.split(",")]
        gpus.append(HostDevice("nvidia", index, name, "sm_" + cap.replace(".", ""), runtime=cuda[1] if cuda else ""))
    return gpus


def amd_gpus() -> list[HostDevice]:
    if not shutil.which("rocm-smi"):
        return []
    try:
        cards = json.loads(_run(["rocm-smi", "--showproductname", "--json"]) or "{}")
    except json.JSONDecodeError:
        return []
    gpus = []
    driver, runtime = _amd_facts() if cards else ("", "")
    for key, info in sorted(cards.items()):
        if not key.startswith("card"):
            continue
        name = info.get("Card Series") or info.get("Card SKU") or info.get("Card Model", "")
        arch = info.get("GFX Version", "")
        gpus.append(HostDevice("amd", key.removeprefix("card"), name, arch, driver, runtime))
    return gpus


def _amd_facts() -> tuple[str, str]:
    """The amdgpu driver's version (rocm-smi) and the ROCm release installed (/opt/rocm/.info/version)."""
    try:
        info = json.loads(_run(["rocm-smi", "--showdriverversion", "--json"]) or "{}")
    except json.JSONDecodeError:
        info = {}
    driver = next((str(v) for card in info.values() if isinstance(card, dict) for k, v in card.items()
                   if "driver version" in k.lower()), "")
    try:
        with open(os.path.join(os.environ.get("ROCM_PATH", "/opt/rocm"), ".info", "version"), encoding="utf-8") as fh:
            release = re.match(r"[0-9]+(\.[0-9]+)*", fh.read().strip())
    except OSError:
        release = None
    return driver, release[0] if release else ""


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
    devices = [HostDevice("cpu", "", _cpu_name(), platform.machine())] + gpus
    return [dataclasses.replace(d, host=socket.gethostname()) for d in devices]


def why_not(device, host: HostDevice) -> str:
    """'' when the host device can be the matrix device, else the first reason it cannot (for `opmatrix hosts`)."""
    if device.vendor != host.vendor:
        return f"vendor {host.vendor}, the device wants {device.vendor}"
    if device.arch not in ("auto", host.arch) and host.vendor != "cpu":
        return f"arch {host.arch}, the device wants {device.arch}"
    if re.search(device.name, host.name, re.IGNORECASE) is None:
        return f"name {host.name!r} does not match /{device.name}/"
    if getattr(device, "host", None) and re.search(device.host, host.host) is None:
        return f"host {host.host or '(not advertised)'!r} does not match /{device.host}/"
    return host_facts.why_not(device, {"driver": host.driver, "runtime": host.runtime})


def _matches(device, host: HostDevice) -> bool:
    return not why_not(device, host)


def resolve(devices: list, host: list[HostDevice]) -> dict[str, list[HostDevice]]:
    """Matrix device id -> the host devices that satisfy it (absent: no host device does)."""
    assigned: dict[str, list[HostDevice]] = {}
    for hd in host:
        matching = [d for d in devices if _matches(d, hd)]
        specific = [d for d in matching if not d.fallback]
        for d in specific or matching:
            assigned.setdefault(d.id, []).append(hd)
    return assigned
