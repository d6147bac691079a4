"""The fleet as Ray sees it: each live node's devices with that node's host facts, which matrix device each
satisfies (and why not), and the label selector that keeps a device's cells on the nodes inside its driver and
runtime ranges (and, for a device that names its hosts, on those hosts: the opmatrix.io/host label).

A Ray task can ask for one custom resource per device model, but a driver range may hold several driver versions
(two canary hosts on 590.44 and 590.48): the selector `opmatrix.io/nvidia-driver in (590.44.01, 590.48.01)` lists
the values of the live nodes inside the range, so Ray places the cell on any of them and on no other node.
Pure functions of `ray.nodes()`; nothing here talks to Ray.
"""
from __future__ import annotations

from opmatrix.core.jobs import HOST_FACTS
from opmatrix.scheduling import host_facts, hosts, resources
from opmatrix.scheduling.hosts import HostDevice


def node_devices(node: dict) -> dict[HostDevice, str]:
    """One live node's devices (from its opmatrix resources), each with the node's facts for its vendor ->
    the resource name."""
    labels = node.get("Labels") or {}
    out = {}
    for name in node.get("Resources", {}):
        device = resources.parse_resource(name)
        if device is not None:
            facts = host_facts.facts_from_labels(device.vendor, labels) if device.vendor != "cpu" else {}
            host = labels.get(host_facts.HOST_LABEL, "")  # only what the node advertises: a selector can use it
            out[HostDevice(device.vendor, "", device.name, device.arch, **facts, host=host)] = name
    return out


def offered(nodes: list[dict]) -> dict[HostDevice, str]:
    """Every distinct (device model, facts) the alive nodes offer -> its resource name."""
    out: dict[HostDevice, str] = {}
    for node in nodes:
        if node.get("Alive"):
            out.update(node_devices(node))
    return out


def selectors(matrix_devices: list, nodes: list[dict]) -> dict[str, dict[str, str]]:
    """Matrix device id -> the Ray label selector of the nodes whose facts lie in its ranges (devices that set no
    range, or that no node satisfies, are absent: the first need none, the second are not routed at all)."""
    assigned = hosts.resolve(matrix_devices, list(offered(nodes)))
    out = {}
    for device in matrix_devices:
        found = assigned.get(device.id)
        keys = {host_facts.label_key(device.vendor, fact): fact for fact in host_facts.constrained(device)}
        if getattr(device, "host", None):
            keys[host_facts.HOST_LABEL] = "host"
        if keys and found:
            out[device.id] = {key: "in({})".format(",".join(sorted({host_facts.label_value(getattr(h, fact))
                                                                    for h in found}))) for key, fact in keys.items()}
    return out


def selects(labels: dict[str, str], selector: dict[str, str]) -> bool:
    """True when a node's labels satisfy a selector made by `selectors` (every key's value among its `in` list)."""
    return all(labels.get(key, "") in value.removeprefix("in(").removesuffix(")").split(",")
               for key, value in selector.items())


def alive_devices(nodes: list[dict], selector: dict[str, str]) -> dict[str, float]:
    """resources.cluster_devices over the nodes a cell's selector admits (where a lost cell may be retried)."""
    return resources.cluster_devices([n for n in nodes if selects(n.get("Labels") or {}, selector)])


def describe(host: HostDevice) -> str:
    facts = "".join(f", {fact} {getattr(host, fact)}" for fact in (*HOST_FACTS, "host") if getattr(host, fact))
    return f"{host.vendor:<6} {host.index or '-':>2}  {host.name}  ({host.arch}{facts})"


def explain(matrix_devices: list, devices: list[HostDevice]) -> list[str]:
    """For `opmatrix hosts`: each host device, the matrix devices it satisfies, and why each other device of its
    vendor does not take it (arch, name, a driver or runtime outside the range, or a fallback left to others)."""
    assigned = hosts.resolve(matrix_devices, devices)
    lines = []
    for hd in devices:
        claimed = [d.id for d in matrix_devices if hd in assigned.get(d.id, [])]
        lines.append(f"{describe(hd)}  -> {', '.join(claimed) or 'no matrix device'}")
        for d in matrix_devices:
            if d.id in claimed or d.vendor != hd.vendor:
                continue
            why = hosts.why_not(d, hd) or "a fallback device, and another device of the matrix claims it"
            lines.append(f"{'':12}not {d.id}: {why}")
    return lines


def explain_cluster(matrix_devices: list, nodes: list[dict]) -> list[str]:
    """`explain` for every live node of a Ray cluster, from the devices and facts each advertises."""
    lines = []
    for node in nodes:
        if node.get("Alive"):
            lines.append(f"node {node.get('NodeID', '')[:8]} ({node.get('NodeManagerHostname') or '?'}):")
            lines += ["  " + line for line in explain(matrix_devices, list(node_devices(node)))]
    return lines
