"""Comparisons across hosts (a driver canary), from one simulated run (tests/fleets.py): the baseline device on host
a, the same software on a second baseline host b (the host A/A), the canary device on host c. Each host has its own
clock state, drift per round, worker offsets and burst noise, and its own host factor on the contestant's time
relative to the framework (cooling, power limit: what differs between hosts of the same software). The comparison is
the real code (opmatrix.upgrade.cross_host over compare.compare_unpaired); the rows are its inputs. `opmatrix compare`
on a stored fleet run, as a subprocess: tests/cells/test_fleet_compare.py."""
import json

import pytest

from opmatrix.core.acceptance import Acceptance
from opmatrix.store import RunManifest
from opmatrix.upgrade import compare, cross_host
from tests.fleets import fleet_run


def judged(df, host_aa: bool = True) -> compare.Comparison:
    return cross_host.compare_hosts(df, "h200-stable", "h200-canary", 1.05, "fleet",
                                    "h200-stable-b" if host_aa else None)


def triton(c: compare.Comparison) -> list[compare.RowChange]:
    return [r for r in c.rows if r.label == "triton"]


@pytest.mark.slow  # 20 nights of cross-host comparisons with bootstrap intervals
def test_over_nights_a_30_percent_slower_canary_is_found_and_the_same_driver_is_safe():
    found = sum(all(r.outcome == compare.RISK for r in triton(judged(fleet_run(seed, 1.30)))) for seed in range(10))
    same = sum(judged(fleet_run(seed, 1.0)).verdict == compare.SAFE for seed in range(10, 20))
    assert found >= 9 and same >= 9, (found, same)


def test_a_canary_driver_that_slows_a_kernel_by_30_percent_is_a_risk_across_hosts():
    c = judged(fleet_run(0, 1.30))
    assert {r.outcome for r in triton(c)} == {compare.RISK}
    assert c.verdict == compare.RISK and not c.paired
    assert "driver 580.95.05 -> 590.48.01" in compare.differs(c)  # what differs between the sides: the driver
    assert compare.summary(c).startswith("**unpaired across hosts**: h200-stable (gpu-a) against h200-canary (gpu-c)")
    assert "host A/A: h200-stable against h200-stable-b (gpu-b), host-to-host floor up to ±" in c.hosts


def test_the_same_driver_on_the_canary_is_safe():
    assert judged(fleet_run(1, 1.0)).verdict == compare.SAFE


def test_the_threshold_covers_the_host_to_host_floor_and_without_a_second_host_says_so():
    """Host b's contestant is 8 % off host a's with the same software: a 10 % difference on the canary is within
    what two hosts differ by, so with the host A/A it is not called a risk; without it, it would be, and the verdict
    says that the host-to-host variation was not measured."""
    df = fleet_run(3, 1.10, host_b=1.08)
    with_aa, without = judged(df), judged(df, host_aa=False)
    for r in triton(with_aa):
        assert r.host_floor is not None and r.host_floor > 0.05 and r.threshold >= 1 + 2 * r.host_floor
        assert r.outcome == compare.SAME, r
    assert {r.outcome for r in triton(without)} == {compare.RISK}
    assert all(r.host_floor is None for r in without.rows)
    assert "**no second baseline host**: host-to-host variation not measured" in without.hosts
    assert "(hosts ±" in compare.markdown([with_aa])


def test_a_device_not_in_the_run_is_named_with_the_devices_it_has():
    with pytest.raises(cross_host.CrossHostError, match=r"device 'h200-nope' has no rows in this run; devices in it: "
                                                        r"h200-canary, h200-stable, h200-stable-b"):
        cross_host.compare_hosts(fleet_run(0, 1.0), "h200-stable", "h200-nope", 1.05)


def test_a_declared_compare_hosts_is_written_with_the_runs_comparisons(tmp_path):
    """A matrix's [[compare_hosts]] reaches the run's manifest and comparison.json / .md (opmatrix.run)."""
    from rich.console import Console

    from opmatrix.report.build import write_comparisons

    df = fleet_run(0, 1.30)
    manifest = RunManifest(run_id="fleet", acceptance=Acceptance(min_speedup=1.05), compare_hosts=[
        {"baseline": "h200-stable", "candidate": "h200-canary", "host_aa": "h200-stable-b"},
        {"baseline": "h200-stable", "candidate": "h200-gone"}])
    console = Console(file=open(tmp_path / "console.txt", "w"), width=200)
    [c] = write_comparisons(df, manifest, tmp_path, console)
    assert c.verdict == compare.RISK and "host A/A" in c.hosts
    [stored] = json.loads((tmp_path / "comparison.json").read_text())
    assert (stored["baseline"], stored["candidate"]) == ("h200-stable", "h200-canary")
    assert "**unpaired across hosts**" in (tmp_path / "comparison.md").read_text()
    console.file.close()
    assert "compare_hosts h200-stable -> h200-gone: not compared (device 'h200-gone' has no rows" in \
        (tmp_path / "console.txt").read_text()


@pytest.mark.parametrize("table, message", [
    ('baseline = "h200-stable"\ncandidate = "h200-nope"', r"compare_hosts\[0\]\.candidate = 'h200-nope': names no "
                                                          r"device of this file"),
    ('baseline = "h200-stable"\ncandidate = "h200-stable"', r"compare_hosts\[0\]\.candidate = 'h200-stable': names a "
                                                            r"device another side"),
    ('baseline = "h200-stable"\ncandidate = "h200-canary"\ntoolchain = "x"', r"compare_hosts\[0\]\.toolchain = 'x'"),
])
def test_a_compare_hosts_must_name_devices_of_the_file(write_matrix, table, message):
    from opmatrix.matrix import MatrixError, load_matrix

    text = """
name = "fleet"
backends = ["torch"]
[[device]]
id = "h200-stable"
vendor = "nvidia"
arch = "sm_90"
driver = "<590"
[[device]]
id = "h200-canary"
vendor = "nvidia"
arch = "sm_90"
driver = ">=590"
[[toolchain]]
name = "host"
system = true
[[kernel]]
name = "gemm_relu"
workloads = { nvidia = ["square_4096"] }
dtypes = { nvidia = ["float16"] }
[[compare_hosts]]
"""
    assert load_matrix(write_matrix(text + 'baseline = "h200-stable"\ncandidate = "h200-canary"\n')).compare_hosts
    with pytest.raises(MatrixError, match=message):
        load_matrix(write_matrix(text + table + "\n"))
