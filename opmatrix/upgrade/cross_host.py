"""Comparisons across hosts: is the candidate driver (or runtime) safe, judged from one run in which the baseline
hosts and the canary hosts ran the same kernels in the same time window?

Two drivers cannot share a GPU, so the two sides cannot be paired round by round. Each side is timed in rounds on
its own host, with the framework baseline in every round and its A/A twin; a contestant is taken relative to the
baseline of its own rounds (each host's clock state and drift cancel within the host), and the two sides' ratios
are compared unpaired (opmatrix.upgrade.compare.compare_unpaired: the round as the unit, both A/A floors).

What that cannot see is how far two hosts of the same software differ: cooling, clocks, the board's power limit,
a neighbour. The **host A/A** measures it: the baseline device on a second host (a third device of the matrix that
claims another baseline host), compared with the first exactly as the canary is. Its deviation from 1 (interval
included) is the row's host floor, and the threshold is the larger of the floors: max(min_speedup, 1 + K_AA x
A/A floors, 1 + K_AA x host floor). Without a second baseline host the verdict says that the host-to-host variation
was not measured: weaker by design, since a difference may then be the hosts' rather than the driver's.
"""
from __future__ import annotations

from opmatrix.upgrade import compare


class CrossHostError(ValueError):
    """Devices that are not in the run, or sides that cannot be compared (the message names the choices)."""


def host_floor(r: compare.RowChange) -> float | None:
    """How far the host A/A's ratio lies from 1, its interval included (a bias between hosts, not only noise)."""
    if r.time_lo is None or r.time_hi is None:
        return None
    return max(r.time_hi - 1.0, 1.0 - r.time_lo, 0.0)


def _side(df, device: str, label: str, toolchain: str | None):
    rows = df[df.device == device]
    if toolchain is not None:
        rows = rows[rows.toolchain == toolchain]
    if rows.empty:
        devices = ", ".join(sorted(set(df.device)))
        raise CrossHostError(f"device {device!r} has no rows" + (f" of toolchain {toolchain!r}" if toolchain else "")
                             + f" in this run; devices in it: {devices}")
    return rows.assign(device=label)


def _hosts(df, device: str) -> str:
    names = sorted({str(h) for h in df[df.device == device].get("host", []) if str(h)})
    return ", ".join(names) or "host not recorded"


def compare_hosts(df, baseline_device: str, candidate_device: str, min_speedup: float, run_id: str = "",
                  host_aa_device: str | None = None, toolchain: str | None = None) -> compare.Comparison:
    """The candidate device's rows against the baseline device's, from one run; with `host_aa_device` (the
    baseline software on a second baseline host) the host-to-host floor raises each row's threshold."""
    label = f"{baseline_device}->{candidate_device}"
    before = _side(df, baseline_device, label, toolchain)
    after = _side(df, candidate_device, label, toolchain)
    floors: dict[str, float] = {}
    if host_aa_device:
        twin = _side(df, host_aa_device, label, toolchain)
        aa = compare.compare_unpaired(before, twin, None, None, min_speedup, [run_id, run_id])
        floors = {r.name: f for r in aa.rows if (f := host_floor(r)) is not None}
    try:
        comparison = compare.compare_unpaired(before, after, None, None, min_speedup, [run_id, run_id],
                                              host_floors=floors)
    except compare.CompareError as exc:
        raise CrossHostError(f"{exc}; name it with --baseline TOOLCHAIN") from None
    comparison.baseline, comparison.candidate, comparison.runs = baseline_device, candidate_device, [run_id]
    sides = (f"{baseline_device} ({_hosts(df, baseline_device)}) against {candidate_device} "
             f"({_hosts(df, candidate_device)}) in the same run, each host against the framework baseline of its own "
             "rounds, compared unpaired")
    if host_aa_device and floors:
        comparison.hosts = (f"{sides}; host A/A: {baseline_device} against {host_aa_device} "
                            f"({_hosts(df, host_aa_device)}), host-to-host floor up to ±{100 * max(floors.values()):.1f}%"
                            " (each row's threshold covers its own)")
    elif host_aa_device:
        comparison.hosts = f"{sides}; the host A/A ({host_aa_device}) has no timed rows in common: host-to-host " \
                           "variation not measured, weaker by design"
    else:
        comparison.hosts = (f"{sides}; **no second baseline host**: host-to-host variation not measured, so a "
                            "difference may be the hosts' rather than the driver's (weaker by design; add a host "
                            "A/A device)")
    return comparison


def declared(df, declared_pairs: list[dict], min_speedup: float, run_id: str, console=None) -> list:
    """The comparisons a run's matrix declared as [[compare_hosts]] (RunManifest.compare_hosts); one whose devices
    have no rows in the run is said on the console and left out."""
    out = []
    for c in declared_pairs:
        try:
            out.append(compare_hosts(df, c["baseline"], c["candidate"], min_speedup, run_id, c.get("host_aa"),
                                     c.get("toolchain")))
        except (CrossHostError, compare.CompareError) as exc:
            if console is not None:
                console.print(f"compare_hosts {c['baseline']} -> {c['candidate']}: not compared ({exc})",
                              highlight=False, markup=False)
    return out
