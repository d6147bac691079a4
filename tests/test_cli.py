"""The command line: machine-readable output, clear errors with exit code 2, host resources for `ray start`."""
import json
import subprocess
import sys

from opmatrix import paths
from opmatrix.scheduling import resources
from opmatrix.scheduling.hosts import HostDevice


def opmatrix(*args):
    return subprocess.run([sys.executable, "-m", "opmatrix", *args], capture_output=True, text=True,
                          cwd=paths.ROOT, timeout=120)


def test_plan_json_lists_cells_and_jobs():
    out = opmatrix("plan", "--json")
    assert out.returncode == 0, out.stderr
    cells = {c["cell"]: c for c in json.loads(out.stdout)}
    assert {"cpu.pinned", "h200.host", "mi300x.host"} <= set(cells)
    job = cells["cpu.pinned"]["jobs"][0]
    assert set(job) == {"kernel", "workload", "dtype", "backend", "variant", "timeout_s"}


def test_bad_matrix_exits_2_with_the_reason(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('backends = ["torch"]\n[[device]]\nid = "x"\nvendor = "intel"\narch = "a"\n')
    out = opmatrix("plan", str(bad))
    assert out.returncode == 2
    assert f"opmatrix: {bad}" in out.stderr and "device[0].vendor" in out.stderr
    assert "Traceback" not in out.stderr


def test_host_resources_advertise_this_hosts_devices():
    out = opmatrix("host-resources", "--json")
    data = json.loads(out.stdout)
    cpu = [name for name in data["resources"] if name.startswith("opmatrix.cpu.")]
    assert len(cpu) == 1 and data["resources"][cpu[0]] == 1.0
    assert opmatrix("host-resources").stdout.startswith("'--resources={")


def test_resource_names_round_trip_to_host_devices():
    h200 = HostDevice("nvidia", "", "NVIDIA H200", "sm_90")
    mi300 = HostDevice("amd", "", "AMD Instinct MI300X", "gfx942")
    cpu = HostDevice("cpu", "", "Intel(R) Xeon(R) Processor", "x86_64")
    assert resources.host_resources([cpu, h200, h200]) == {
        "opmatrix.cpu.x86_64.Intel-R-Xeon-R-Processor": 1.0, "opmatrix.gpu.nvidia.sm_90.NVIDIA-H200": 2.0,
        "opmatrix.host": 1.0}
    assert resources.parse_resource(resources.resource_name(h200)) == h200
    assert resources.parse_resource(resources.resource_name(mi300)) == mi300
    assert resources.parse_resource(resources.resource_name(cpu)).arch == "x86_64"
    assert resources.parse_resource("CPU") is None
    assert "--num-gpus=2" in resources.ray_start_args([cpu, h200, h200])
