"""Host facts a matrix device may constrain beyond the GPU model: the GPU driver's version and the CUDA / ROCm
version that driver offers (its runtime).

A host's probe reports them (opmatrix.scheduling.hosts: NVML or nvidia-smi, rocm-smi); a device's `driver` and
`runtime` ranges (PEP 440 specifiers, checked when the matrix loads: opmatrix.matrix_checks.version_specifier) decide
which hosts it claims. So two devices can name the same GPU model with different driver ranges, the canary hosts
of a driver rollout and the rest of the fleet, and each claims only its own hosts.

On Ray each host carries its facts as node labels, `opmatrix.io/<vendor>-driver` and `opmatrix.io/<vendor>-runtime`
(beside its device resources, opmatrix.scheduling.resources); a cell of a device with ranges asks Ray, through a
label selector, for a node whose fact is one of the values inside its ranges (opmatrix.scheduling.fleet).
"""
from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

from opmatrix.core.jobs import HOST_FACTS
from opmatrix.matrix_checks import version_specifier

LABEL_PREFIX = "opmatrix.io/"
LABEL_VALUE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?")  # what Ray accepts as a label value


def label_key(vendor: str, fact: str) -> str:
    """The node label holding a vendor's fact: opmatrix.io/nvidia-driver, opmatrix.io/amd-runtime ..."""
    return f"{LABEL_PREFIX}{vendor}-{fact}"


def label_value(value: str) -> str:
    """A fact as a Ray label value (letters, digits, '_.-', 63 at most): versions are that already."""
    text = re.sub(r"[^A-Za-z0-9_.-]+", "-", value).strip("-_.")[:63].rstrip("-_.")
    return text if LABEL_VALUE.fullmatch(text) else ""


def fact_labels(devices) -> dict[str, str]:
    """The node labels of a host's GPU facts (the first GPU of each vendor: a driver is per host and vendor)."""
    labels: dict[str, str] = {}
    for d in devices:
        if d.vendor == "cpu":
            continue
        for fact in HOST_FACTS:
            value = label_value(getattr(d, fact, "") or "")
            if value:
                labels.setdefault(label_key(d.vendor, fact), value)
    return labels


HOST_LABEL = LABEL_PREFIX + "host"  # the host's name, for devices that pick hosts by name (`host` pattern)


def host_label(devices) -> dict[str, str]:
    """The label naming the host, from its devices' probe (empty when the probe did not name it)."""
    name = label_value(next((d.host for d in devices if getattr(d, "host", "")), ""))
    return {HOST_LABEL: name} if name else {}


def facts_from_labels(vendor: str, labels: dict[str, str]) -> dict[str, str]:
    """The facts a node's labels state for one vendor (the inverse of fact_labels); missing ones are ''."""
    return {fact: labels.get(label_key(vendor, fact), "") for fact in HOST_FACTS}


def why_not(device, facts: dict[str, str]) -> str:
    """'' when every range the device sets holds the host's fact, else why not, e.g. 'driver 580.65.06 is outside
    >=590,<600'. A fact the host did not report never satisfies a range (a canary must be known to be one)."""
    for fact in HOST_FACTS:
        wanted = getattr(device, fact, None)
        if not wanted:
            continue
        value = facts.get(fact, "")
        if not value:
            return f"{fact} unknown (the host's probe reported none), the device wants {wanted}"
        try:
            version = Version(value)
        except InvalidVersion:
            return f"{fact} {value!r} is not a version, the device wants {wanted}"
        if not version_specifier(wanted).contains(version, prereleases=True):
            return f"{fact} {value} is outside {wanted}"
    return ""


def constrained(device) -> list[str]:
    """The facts a device sets ranges for."""
    return [fact for fact in HOST_FACTS if getattr(device, fact, None)]
