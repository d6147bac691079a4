"""Ray scheduling, second cluster: a host with a CPU and a GPU never runs a CPU timing cell beside another cell,
and an embedded run starts its own Ray beside a running cluster. Apart from test_ray_cluster.py so that the two
clusters' tests run side by side."""
import os
from datetime import datetime

import pytest

from tests.helpers_ray import HOST, matrix_text, plugin_root, ray_cluster, run_scheduler

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return plugin_root(tmp_path_factory)


@pytest.fixture(scope="module")
def cluster():
    # one host with a CPU and a GPU and CPU cores to spare: the head itself (no node added on two cores)
    yield from ray_cluster({}, head=dict(num_cpus=2, num_gpus=1, resources={
        "opmatrix.cpu.x86_64.Combo-CPU": 1, "opmatrix.gpu.nvidia.sm_89.NVIDIA-L4": 1, HOST: 1}))


def test_cpu_timing_cell_never_shares_its_host_with_another_cell(cluster, root):
    """One host with a CPU and a GPU and CPU cores to spare: the CPU cell holds the host token alone, so the
    GPU cell runs before or after it, never beside it (CPU timings would be disturbed)."""
    c, _ = cluster
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
    acceptance = '[acceptance]\nbaseline = "probe"\n'  # its own framework path: the run reaches a verdict
    (root / "embedded.toml").write_text(matrix_text(root, devices, '["quick"]') + acceptance)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run([sys.executable, "-m", "opmatrix", "run", str(root / "embedded.toml"), "--run-id",
                           "embedded", "--reports", str(root / "reports")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_dir = root / "reports" / "embedded"
    manifest = (run_dir / "run.json").read_text()
    assert '"scheduler": "embedded local Ray: 1 node(s)' in manifest
    assert "ok" in (run_dir / "report.md").read_text()
    # what the cell does between rows comes back through Ray's queue too (this job is correctness-only: no rounds)
    assert "cpu.host: lite quick float32: building and checking 1 contestant(s)" in proc.stdout, proc.stdout[:3000]
