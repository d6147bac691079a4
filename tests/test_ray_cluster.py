"""Ray scheduling on Ray's own multi-node test cluster (ray.cluster_utils.Cluster), one machine, real raylets.

Nodes advertise different devices through opmatrix's custom resources. The cells are lightweight (CPU work:
a torch vector op) but go through the real path: Ray task on the chosen node -> nox environment -> cell runner
-> worker processes -> results streamed back to the driver. Shown: every cell lands on a node with its device; a
device no node has is `no_host` at once; results arrive while the cell is still running; a node lost mid-cell
is retried on another node with the device, or recorded `lost` when there is none, keeping what already
arrived.
"""
import os
from datetime import datetime
import textwrap
import time
from pathlib import Path

import pytest
import ray
from ray.cluster_utils import Cluster

from opmatrix import plan as plan_mod
from opmatrix.progress import ProgressView
from opmatrix.scheduling.ray_cluster import RayScheduler
from opmatrix.matrix import load_matrix
from tests.helpers import probe_adapter, write_plugins

pytestmark = pytest.mark.integration

H200 = "opmatrix.gpu.nvidia.sm_90.NVIDIA-H200"
MI300X = "opmatrix.gpu.amd.gfx942.AMD-Instinct-MI300X"
CPU = "opmatrix.cpu.x86_64.Test-CPU"
HOST = "opmatrix.host"

IMPL = '''
import time
def build(w, dtype, device, variant):
    def fn(x, out):
        time.sleep(w["sleep"] / 4)  # first call + 3 trials
        out.copy_(x * 2)
    return fn
'''
def matrix_text(root: Path, devices: str, workloads: str = '["quick", "slow"]') -> str:
    return textwrap.dedent(f"""
        name = "ray"
        backends = ["probe"]
        [run]
        timeout_s = 120
        compile_only = false
        kernels_dir = "{root / 'kernels'}"
        backends_dir = "{root / 'backends'}"
        [[toolchain]]
        name = "host"
        system = true
        [[kernel]]
        name = "lite"
        workloads = {{ nvidia = {workloads}, amd = {workloads}, cpu = {workloads} }}
        dtypes = {{ nvidia = ["float32"], amd = ["float32"], cpu = ["float32"] }}
        """) + textwrap.dedent(devices)


DEVICES = """
[[device]]
id = "h200"
vendor = "nvidia"
arch = "sm_90"
name = "H200"
[[device]]
id = "mi300x"
vendor = "amd"
arch = "gfx942"
name = "MI300X"
[[device]]
id = "cpu"
vendor = "cpu"
arch = "x86_64"
[[device]]
id = "b200"
vendor = "nvidia"
arch = "sm_100"
name = "B200"
"""


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("ray")
    write_plugins(root, "lite", {"probe": IMPL}, probe_adapter(None))  # correctness-only: no GPU to time
    return root


@pytest.fixture(scope="module")
def cluster():
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    nodes = {
        "h200-a": cluster.add_node(num_cpus=1, num_gpus=1, resources={H200: 1, HOST: 1}),
        "mi300x": cluster.add_node(num_cpus=1, num_gpus=1, resources={MI300X: 1, HOST: 1}),
        "cpu": cluster.add_node(num_cpus=1, resources={CPU: 1, HOST: 1}),
    }
    cluster.wait_for_nodes()
    yield cluster, nodes
    if ray.is_initialized():
        ray.shutdown()
    cluster.shutdown()


def node_id(node) -> str:
    return node.node_id


class Recorder(ProgressView):
    """The real progress view, also noting when each result reached the driver."""

    def __init__(self, plans, console):
        super().__init__(plans, console)
        self.arrivals = []

    def result(self, r):
        self.arrivals.append((time.monotonic(), r))
        super().result(r)


def run_scheduler(cluster, root, name, devices, workloads='["quick", "slow"]', during=None):
    """Run a matrix on the cluster through RayScheduler; `during(result)` is called as each result arrives."""
    from rich.console import Console

    path = root / f"{name}.toml"
    path.write_text(matrix_text(root, devices, workloads))
    matrix = load_matrix(path)
    plans = plan_mod.cell_plans(matrix, name, root / "scratch")
    results = []
    with RayScheduler(address=cluster.address) as scheduler:
        progress = Recorder(plans, Console(file=open(os.devnull, "w")))
        for r in scheduler.run(plans, matrix.device, progress):
            progress.result(r)
            results.append(r)
            if during:
                during(r)
    return results, progress


@pytest.fixture(scope="module")
def routed(cluster, root):
    c, nodes = cluster
    start = time.monotonic()
    results, progress = run_scheduler(c, root, "routing", DEVICES)
    return results, progress, nodes, time.monotonic() - start


def test_each_cell_lands_on_a_node_with_its_device(routed):
    results, _, nodes, _ = routed
    where = {"h200": nodes["h200-a"], "mi300x": nodes["mi300x"], "cpu": nodes["cpu"]}
    for device, node in where.items():
        rows = [r for r in results if r.device == device]
        assert len(rows) == 2 and {r.status for r in rows} == {"ok"}, [(r.status, r.error) for r in rows]
        assert {r.node for r in rows} == {node_id(node)}


def test_gpu_cells_get_a_gpu_from_ray(routed):
    results = routed[0]
    assert {r.gpu_index for r in results if r.device in ("h200", "mi300x")} == {"0"}
    assert {r.gpu_index for r in results if r.device == "cpu"} == {""}


def test_device_without_a_node_is_no_host_at_once(routed):
    results, _, _, _ = routed
    no_host = [r for r in results if r.device == "b200"]
    assert len(no_host) == 2 and {r.status for r in no_host} == {"no_host"}
    assert "no node of the Ray cluster offers device 'b200'" in no_host[0].error
    assert results[:2] == no_host  # reported before any cell ran, not after waiting


def test_results_stream_back_while_the_cell_runs(routed):
    _, progress, _, _ = routed
    arrivals = {(r.device, r.workload): t for t, r in progress.arrivals}
    for device in ("h200", "mi300x", "cpu"):
        # the slow job sleeps 8 s; the quick job's result was stored well before the cell finished
        assert arrivals[(device, "slow")] - arrivals[(device, "quick")] > 6


def test_lost_node_is_retried_on_another_node_with_the_device(cluster, root):
    c, nodes = cluster
    spare = c.add_node(num_cpus=1, num_gpus=1, resources={H200: 1, HOST: 1})
    c.wait_for_nodes()
    ids = {node_id(nodes["h200-a"]): nodes["h200-a"], node_id(spare): spare}
    killed = []

    def kill_runner(r):
        if r.workload == "quick" and not killed:
            killed.append(r.node)
            c.remove_node(ids[r.node])

    results, _ = run_scheduler(c, root, "retry", DEVICES.split("[[device]]\nid = \"mi300x\"")[0],
                               during=kill_runner)
    by_workload = {r.workload: r for r in results}
    assert set(by_workload) == {"quick", "slow"}
    assert by_workload["quick"].node == killed[0]  # kept from the lost node
    assert by_workload["slow"].status == "ok"
    assert by_workload["slow"].node != killed[0] and by_workload["slow"].node in ids  # rerun elsewhere
    assert len(results) == 2  # the quick job was not run twice


def test_lost_node_without_a_replacement_is_lost_and_keeps_what_arrived(cluster, root):
    c, nodes = cluster
    killed = []

    def kill_runner(r):
        if r.workload == "quick" and not killed:
            killed.append(r.node)
            c.remove_node(nodes["mi300x"])

    devices = '[[device]]\nid = "mi300x"\nvendor = "amd"\narch = "gfx942"\nname = "MI300X"\n'
    start = time.monotonic()
    results, _ = run_scheduler(c, root, "lost", devices, during=kill_runner)
    by_workload = {r.workload: r for r in results}
    assert by_workload["quick"].status == "ok" and by_workload["quick"].node == killed[0]
    assert by_workload["slow"].status == "lost"
    assert "no other live node offers" in by_workload["slow"].error
    assert time.monotonic() - start < 90  # it did not wait for a node that will never come


def test_cpu_timing_cell_never_shares_its_host_with_another_cell(cluster, root):
    """One host with a CPU and a GPU and CPU cores to spare: the CPU cell holds the host token alone, so the
    GPU cell runs before or after it, never beside it (CPU timings would be disturbed)."""
    c, _ = cluster
    c.add_node(num_cpus=2, num_gpus=1, resources={"opmatrix.cpu.x86_64.Combo-CPU": 1,
                                                  "opmatrix.gpu.nvidia.sm_89.NVIDIA-L4": 1, HOST: 1})
    c.wait_for_nodes()
    devices = ('[[device]]\nid = "combo-cpu"\nvendor = "cpu"\narch = "x86_64"\nname = "Combo"\n'
               '[[device]]\nid = "l4"\nvendor = "nvidia"\narch = "sm_89"\nname = "L4"\n')
    results, _ = run_scheduler(c, root, "exclusive", devices, workloads='["slow"]')
    assert {r.device: r.status for r in results} == {"combo-cpu": "ok", "l4": "ok"}
    assert len({r.node for r in results}) == 1  # the same host
    spans = sorted((datetime.fromisoformat(r.started_at).timestamp(), r.duration_s) for r in results)
    (first_start, first_len), (second_start, _) = spans
    assert second_start >= first_start + first_len - 1  # one after the other (start times are whole seconds)


def test_embedded_run_starts_its_own_ray_beside_a_running_cluster(cluster, root):
    """Without an address, a run never attaches to some other Ray on the machine: it starts and stops its own
    (`opmatrix run` as its own process, as a user runs it, beside the test cluster)."""
    import subprocess
    import sys

    devices = '[[device]]\nid = "cpu"\nvendor = "cpu"\narch = "auto"\n'
    (root / "embedded.toml").write_text(matrix_text(root, devices, '["quick"]'))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run([sys.executable, "-m", "opmatrix", "run", str(root / "embedded.toml"), "--run-id",
                           "embedded", "--reports", str(root / "reports")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_dir = root / "reports" / "embedded"
    manifest = (run_dir / "run.json").read_text()
    assert '"scheduler": "embedded local Ray: 1 node(s)' in manifest
    assert "ok" in (run_dir / "report.md").read_text()


def test_nothing_of_a_lost_node_outlives_it(cluster, root):
    """The cells of the nodes killed above (nox, cell runners, workers) died with them: the product leaves
    nothing running (each child process dies with its parent)."""
    deadline = time.monotonic() + 15
    while (left := _processes_mentioning(str(root))) and time.monotonic() < deadline:
        time.sleep(0.2)  # PR_SET_PDEATHSIG is delivered asynchronously
    assert left == []


def _processes_mentioning(marker: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
        except OSError:
            continue
        if marker in cmdline:
            found.append(f"{proc.name}: {cmdline[:200]}")
    return found
