"""How a host advertises its devices to Ray, and how the driver reads them back from the live cluster.

Each device model becomes a Ray custom resource whose name carries vendor, arch and model:
    opmatrix.gpu.nvidia.sm_90.NVIDIA-H200 = <number of such GPUs>
    opmatrix.cpu.x86_64.AMD-EPYC          = 1   (one CPU cell at a time per host: CPU timings must not overlap)
plus `opmatrix.host = 1`, so a CPU timing cell can hold its host alone, and node labels (opmatrix.io/vendor,
/arch, /gpu) for people and label selectors; the host facts a device may constrain (opmatrix.io/nvidia-driver,
/nvidia-runtime ...: opmatrix.scheduling.host_facts) are labels that cells select on. A cell asks for its device's
resource (and `num_gpus=1`), so Ray places it only on a node that has the device and hands it one GPU.
"""
from __future__ import annotations

import json
import re
import shlex
from collections import defaultdict

from opmatrix.scheduling import host_facts
from opmatrix.scheduling.hosts import HostDevice

PREFIX = "opmatrix."
HOST = PREFIX + "host"  # 1 per host: a CPU timing cell takes all of it, every other cell a sliver
SHARED = 0.01  # what a GPU or compile-only cell takes of HOST: many share a host, none beside a CPU timing cell


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.]+", "-", name).strip("-") or "unknown"


def resource_name(device: HostDevice) -> str:
    kind = "cpu" if device.vendor == "cpu" else "gpu"
    if kind == "cpu":
        return f"{PREFIX}cpu.{slug(device.arch)}.{slug(device.name)}"
    return f"{PREFIX}gpu.{device.vendor}.{slug(device.arch)}.{slug(device.name)}"


def parse_resource(name: str) -> HostDevice | None:
    """The inverse of resource_name (model names come back with '-' for spaces)."""
    parts = name.split(".", 3) if name.startswith(PREFIX + "gpu.") else name.split(".", 2)
    if name.startswith(PREFIX + "gpu.") and len(parts) == 4:
        vendor, rest = parts[2], parts[3]
        arch, _, model = rest.partition(".")
        return HostDevice(vendor, "", model.replace("-", " "), arch)
    if name.startswith(PREFIX + "cpu.") and len(parts) == 3:
        arch, _, model = parts[2].partition(".")
        return HostDevice("cpu", "", model.replace("-", " "), arch)
    return None


def host_resources(devices: list[HostDevice]) -> dict[str, float]:
    counts: dict[str, float] = defaultdict(float)
    counts[HOST] = 1.0
    for d in devices:
        counts[resource_name(d)] = 1.0 if d.vendor == "cpu" else counts[resource_name(d)] + 1.0
    return dict(counts)


def host_labels(devices: list[HostDevice]) -> dict[str, str]:
    gpus = [d for d in devices if d.vendor != "cpu"]
    if not gpus:
        return {"opmatrix.io/vendor": "cpu", **host_facts.host_label(devices)}
    first = gpus[0]
    return {"opmatrix.io/vendor": first.vendor, "opmatrix.io/arch": slug(first.arch),
            "opmatrix.io/gpu": slug(first.name)[:63], "opmatrix.io/gpu-count": str(len(gpus)),
            **host_facts.fact_labels(gpus), **host_facts.host_label(devices)}


def ray_start_args(devices: list[HostDevice]) -> str:
    """The arguments for `ray start` that advertise this host's devices."""
    gpus = sum(1 for d in devices if d.vendor != "cpu")
    labels = ",".join(f"{k}={v}" for k, v in host_labels(devices).items())
    args = [f"--resources={json.dumps(host_resources(devices), sort_keys=True)}", f"--labels={labels}"]
    if gpus:
        args.append(f"--num-gpus={gpus}")
    return " ".join(shlex.quote(a) for a in args)


def cluster_devices(nodes: list[dict]) -> dict[str, float]:
    """Resource name -> total amount over the alive nodes (from ray.nodes())."""
    totals: dict[str, float] = defaultdict(float)
    for node in nodes:
        if node.get("Alive"):
            for name, amount in node.get("Resources", {}).items():
                if name.startswith(PREFIX):
                    totals[name] += amount
    return dict(totals)
