"""Helpers of the Ray tests (test_ray_cluster.py, test_ray_embedded.py, in tests/cells): Ray's multi-node test
cluster, a lightweight kernel whose cells still go the real path (Ray task -> nox environment -> cell runner ->
workers), and a driver loop that records when each result arrives."""
import os
import textwrap
import time
from pathlib import Path

import ray
from ray.cluster_utils import Cluster

from opmatrix import plan as plan_mod
from opmatrix.matrix import load_matrix
from opmatrix.progress import ProgressView
from opmatrix.scheduling.ray_cluster import RayScheduler
from tests.helpers import probe_adapter, write_plugins

H200 = "opmatrix.gpu.nvidia.sm_90.NVIDIA-H200"
MI300X = "opmatrix.gpu.amd.gfx942.AMD-Instinct-MI300X"
CPU = "opmatrix.cpu.x86_64.Test-CPU"
HOST = "opmatrix.host"

# The `slow` job lasts SLOW_S (first call + 3 trials), `quick` none: long enough that a result streamed before the
# cell ends, a node lost mid-cell and two cells one after the other on a host are told apart from the alternative
# by seconds, and no longer (each second is waited out again in every run of these tests).
SLOW_S = 4
IMPL = f'''
import time
def build(w, dtype, device, variant):
    def fn(x, out):
        time.sleep({SLOW_S / 4} if w["sleep"] else 0)  # first call + 3 trials
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


def plugin_root(tmp_path_factory):
    """A folder with the `lite` kernel and its correctness-only `probe` backend (no GPU to time)."""
    root = tmp_path_factory.mktemp("ray")
    write_plugins(root, "lite", {"probe": IMPL}, probe_adapter(None))  # correctness-only: no GPU to time
    return root


def ray_cluster(nodes: dict, head: dict | None = None):
    """Ray's multi-node test cluster: a head (add_node arguments `head`, by default one CPU and no device) and the
    named nodes; yields (cluster, nodes: the head as "head" too) and shuts it down. Every node is a raylet, an agent
    and a worker on this machine's two cores: a device node that may not be lost can be the head."""
    cluster = Cluster(initialize_head=True, head_node_args=head or {"num_cpus": 1})
    added = {"head": cluster.head_node, **{name: cluster.add_node(**args) for name, args in nodes.items()}}
    cluster.wait_for_nodes()
    yield cluster, added
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


