"""Driver ranges routed by Ray's own multi-node test cluster (ray.cluster_utils.Cluster): two nodes with the same GPU
model advertise different driver facts (node labels, as `opmatrix host-resources` writes them; the facts are
inputs), and a matrix with a stable, a canary and a future-driver device of that model. Each cell goes the real
path (Ray task with a label selector -> nox environment -> cell runner -> worker) and lands only on the node inside
its device's range; the device no node satisfies is `no_host` at once; `opmatrix hosts --address` explains each
node from what it advertises."""
import subprocess
import sys

import pytest

from opmatrix.scheduling import resources
from opmatrix.scheduling.hosts import HostDevice
from tests.helpers_ray import plugin_root, ray_cluster, run_scheduler

pytestmark = pytest.mark.integration

STABLE = HostDevice("nvidia", "0", "NVIDIA H200", "sm_90", driver="580.95.05", runtime="13.0")
CANARY = HostDevice("nvidia", "0", "NVIDIA H200", "sm_90", driver="590.48.01", runtime="13.1")
DEVICES = """
[[device]]
id = "h200-stable"
vendor = "nvidia"
arch = "sm_90"
name = "H200"
driver = "<590"
[[device]]
id = "h200-canary"
vendor = "nvidia"
arch = "sm_90"
name = "H200"
driver = ">=590,<600"
runtime = "13.*"
[[device]]
id = "h200-next"
vendor = "nvidia"
arch = "sm_90"
name = "H200"
driver = ">=600"
"""


def advertised(host: HostDevice) -> dict:
    """add_node arguments of a host started with `ray start $(opmatrix host-resources)`."""
    return dict(num_cpus=1, num_gpus=1, resources=resources.host_resources([host]),
                labels=resources.host_labels([host]))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    root = plugin_root(tmp_path_factory)
    # the stable host is the head: one node fewer on two cores
    for cluster, nodes in ray_cluster({"canary": advertised(CANARY)}, head=advertised(STABLE)):
        results, _ = run_scheduler(cluster, root, "fleet", DEVICES, workloads='["quick"]')
        yield cluster, nodes, results, root


def test_each_device_runs_only_on_the_node_inside_its_driver_range(fleet):
    _, nodes, results, _ = fleet
    stable = [r for r in results if r.device == "h200-stable"]
    canary = [r for r in results if r.device == "h200-canary"]
    assert [r.status for r in stable + canary] == ["ok", "ok"], [(r.status, r.error) for r in results]
    assert stable[0].node == nodes["head"].node_id and canary[0].node == nodes["canary"].node_id


def test_a_device_whose_range_no_node_satisfies_is_no_host_at_once(fleet):
    _, _, results, _ = fleet
    (future,) = [r for r in results if r.device == "h200-next"]
    assert future.status == "no_host" and results[0] is future
    assert "offers device 'h200-next' (nvidia sm_90, name ~ /H200/, driver >=600)" in future.error


def test_hosts_explains_every_node_of_the_cluster(fleet):
    cluster, nodes, _, root = fleet
    out = subprocess.run([sys.executable, "-m", "opmatrix", "hosts", str(root / "fleet.toml"), "--address",
                          cluster.address], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert f"node {nodes['canary'].node_id[:8]}" in text
    assert "NVIDIA H200  (sm_90, driver 590.48.01, runtime 13.1)  -> h200-canary" in text
    assert "not h200-stable: driver 590.48.01 is outside <590" in text
    assert "not h200-next: driver 580.95.05 is outside >=600" in text
