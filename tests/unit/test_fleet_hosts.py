"""Drivers and runtimes as matrix dimensions, as pure functions: a [[device]]'s driver / runtime ranges are checked
when the matrix loads, decide which hosts it claims (two devices of one GPU model, canary and stable: tests/fleets.py's
fleet matrix), show in `opmatrix hosts` with the reason a host is not a device, and become Ray label selectors from
each node's advertised facts. The facts here are inputs (HostDevice values, ray.nodes()-shaped dicts); matching,
routing and the explanations are the real code. The command line on the same matrix: tests/cells/test_fleet_hosts.py;
Ray's own test cluster routes on them in tests/cells/test_fleet_ray.py."""
import dataclasses

import pytest

from opmatrix import plan as plan_mod
from opmatrix.core.jobs import ToolchainSpec
from opmatrix.matrix import MatrixError, load_matrix
from opmatrix.scheduling import fleet, hosts, resources
from opmatrix.scheduling.hosts import HostDevice
from opmatrix.scheduling.ray_cluster import CellRun, after_loss, route, task_options
from tests.fleets import FLEET

H200 = "opmatrix.gpu.nvidia.sm_90.NVIDIA-H200"
STABLE = HostDevice("nvidia", "0", "NVIDIA H200", "sm_90", driver="580.95.05", runtime="13.0")
CANARY = HostDevice("nvidia", "0", "NVIDIA H200", "sm_90", driver="590.48.01", runtime="13.1")
OLD_CUDA = HostDevice("nvidia", "0", "NVIDIA H200", "sm_90", driver="595.10", runtime="12.8")
UNKNOWN = HostDevice("nvidia", "0", "NVIDIA H200", "sm_90")
CPU = HostDevice("cpu", "", "Test CPU", "x86_64")


@pytest.fixture
def matrix(write_matrix):
    return load_matrix(write_matrix(FLEET))


@pytest.mark.parametrize("key, value, message", [
    ("driver", ">>590", r"device\[1\]\.driver = '>>590': not a version range; allowed: PEP 440 version specifiers"),
    ("driver", "", r"device\[1\]\.driver = '': empty; allowed: PEP 440"),
    ("runtime", "cuda 13", r"device\[1\]\.runtime = 'cuda 13': not a version range"),
    ("driver", "===590.48.01", r"device\[1\]\.driver = '===590.48.01': arbitrary equality"),
    ("driver", 590, r"device\[1\]\.driver = 590: Input should be a valid string"),
])
def test_a_bad_range_is_refused_naming_file_key_and_what_is_allowed(write_matrix, key, value, message):
    text = FLEET.replace('driver = ">=590,<600"\nruntime = "13.*"', f"{key} = {value!r}".replace("'", '"'))
    with pytest.raises(MatrixError, match=message) as err:
        load_matrix(write_matrix(text))
    assert str(err.value).startswith(str(write_matrix(text)))


def test_a_cpu_device_cannot_constrain_a_driver(write_matrix):
    text = FLEET.replace('arch = "x86_64"', 'arch = "x86_64"\ndriver = ">=1"')
    with pytest.raises(MatrixError, match=r"device\[2\]: a cpu device has no GPU driver or runtime to constrain"):
        load_matrix(write_matrix(text))


def test_two_devices_of_one_gpu_model_each_claim_only_hosts_in_their_ranges(matrix):
    assigned = hosts.resolve(matrix.device, [CPU, STABLE])
    assert assigned == {"h200-stable": [STABLE], "cpu": [CPU]}
    assert hosts.resolve(matrix.device, [CANARY])["h200-canary"] == [CANARY]
    assert "h200-stable" not in hosts.resolve(matrix.device, [CANARY])
    assert hosts.resolve(matrix.device, [OLD_CUDA]) == {}  # canary driver, but CUDA 12.8 is outside 13.*
    assert hosts.resolve(matrix.device, [UNKNOWN]) == {}  # a host that reported no driver is no device with a range


def test_the_environment_hash_is_what_installs_it(matrix):
    """Host facts choose hosts, not packages; a device's name, arch and description label rows; which devices a
    toolchain serves chooses cells: none of them changes the environment. Its packages, index, Python and
    variables do."""
    device = plan_mod.device_spec(matrix.devices()["cpu"])
    toolchain = ToolchainSpec(name="host", system=True)
    same = plan_mod.env_hash(device, toolchain)
    relabelled = dataclasses.replace(device, name="Another CPU", description="renamed", driver=">=1", host="vm.*")
    assert plan_mod.env_hash(relabelled, dataclasses.replace(toolchain, name="other", devices=("cpu",))) == same
    for changed in ({"packages": ("torch==2.12.0",)}, {"python": "3.12"}, {"env": {"X": "1"}},
                    {"index": {"cpu": "https://example.invalid/simple"}}, {"system": False}):
        assert plan_mod.env_hash(device, dataclasses.replace(toolchain, **changed)) != same, changed
    assert plan_mod.env_hash(device, dataclasses.replace(toolchain, index={"amd": "https://x.invalid"})) == same
    canary = plan_mod.device_spec(matrix.devices()["h200-canary"])
    assert "driver >=590,<600, runtime 13.*" in canary.describe()  # what a no_host row says it wanted


def test_hosts_explains_which_device_a_host_is_and_why_not_the_others(matrix):
    lines = fleet.explain(matrix.device, [CPU, CANARY, OLD_CUDA])
    assert lines[0].endswith("-> cpu")
    assert "driver 590.48.01, runtime 13.1)  -> h200-canary" in lines[1]
    assert lines[2].strip() == "not h200-stable: driver 590.48.01 is outside <590"
    assert "-> no matrix device" in lines[3]
    assert "not h200-canary: runtime 12.8 is outside 13.*" in lines[5]


def test_a_host_advertises_its_facts_as_node_labels():
    labels = resources.host_labels([CPU, CANARY, CANARY])
    assert labels["opmatrix.io/nvidia-driver"] == "590.48.01" and labels["opmatrix.io/nvidia-runtime"] == "13.1"
    assert "--labels=" in resources.ray_start_args([CPU, CANARY]) and "nvidia-driver=590.48.01" in \
        resources.ray_start_args([CPU, CANARY])
    assert "opmatrix.io/nvidia-driver" not in resources.host_labels([CPU, UNKNOWN])  # none reported: no label


def node(host: HostDevice, alive: bool = True) -> dict:
    """A ray.nodes() entry of a host started with `opmatrix host-resources`."""
    return {"Alive": alive, "NodeID": f"{host.driver or 'none'}-node", "Resources": resources.host_resources([host]),
            "Labels": resources.host_labels([host])}


def test_ray_routes_each_device_to_the_nodes_inside_its_ranges(matrix):
    other_canary = dataclasses.replace(CANARY, driver="590.44.01")
    nodes = [node(STABLE), node(CANARY), node(other_canary), node(UNKNOWN)]
    assert route(matrix.device, nodes) == {"h200-stable": H200, "h200-canary": H200}
    selectors = fleet.selectors(matrix.device, nodes)
    assert selectors == {"h200-stable": {"opmatrix.io/nvidia-driver": "in(580.95.05)"},
                         "h200-canary": {"opmatrix.io/nvidia-driver": "in(590.44.01,590.48.01)",
                                         "opmatrix.io/nvidia-runtime": "in(13.1)"}}
    admitted = [n["NodeID"] for n in nodes if fleet.selects(n["Labels"], selectors["h200-canary"])]
    assert admitted == ["590.48.01-node", "590.44.01-node"]
    assert route(matrix.device, [node(STABLE, alive=False), node(UNKNOWN)]) == {}  # nobody in range: no_host


def test_a_cell_task_selects_its_nodes_and_a_lost_one_retries_only_inside_the_range(matrix):
    plans = {p.cell.id: p for p in plan_mod.cell_plans(matrix, "u", "/tmp/unit-scratch")}
    selector = fleet.selectors(matrix.device, [node(CANARY)])["h200-canary"]
    options = task_options(plans["h200-canary.host"], H200, host_tokens=False, selector=selector)
    assert options["label_selector"] == selector and options["resources"] == {H200: 1}
    run = CellRun(plans["h200-canary.host"], H200, selector=selector)
    retry, _ = after_loss(run, fleet.alive_devices([node(CANARY)], selector), "NodeDiedError")
    assert retry is not None and retry.selector == selector
    gone, why = after_loss(run, fleet.alive_devices([node(STABLE)], selector), "NodeDiedError")  # an H200, wrong driver
    assert gone is None and "no other live node offers" in why


def test_a_device_can_name_its_hosts_for_a_second_baseline_host(write_matrix):
    """The host A/A needs the baseline software on two hosts: two devices of one model and range, each naming its
    hosts by a pattern on the host's name; Ray selects on the opmatrix.io/host label the host advertises."""
    second = FLEET.replace('driver = "<590"', 'driver = "<590"\nhost = "^gpu-a$"') + (
        '[[device]]\nid = "h200-stable-b"\nvendor = "nvidia"\narch = "sm_90"\nname = "H200"\ndriver = "<590"\n'
        'host = "^gpu-b$"\n')
    m = load_matrix(write_matrix(second))
    a, b = dataclasses.replace(STABLE, host="gpu-a"), dataclasses.replace(STABLE, host="gpu-b")
    assert hosts.resolve(m.device, [a, b]) == {"h200-stable": [a], "h200-stable-b": [b]}
    assert "not h200-stable: host 'gpu-b' does not match /^gpu-a$/" in "\n".join(fleet.explain(m.device, [b]))
    nodes = [node(a), node(b), node(UNKNOWN)]
    assert resources.host_labels([a])["opmatrix.io/host"] == "gpu-a"
    assert fleet.selectors(m.device, nodes)["h200-stable-b"] == {"opmatrix.io/nvidia-driver": "in(580.95.05)",
                                                                 "opmatrix.io/host": "in(gpu-b)"}
    assert "host ~ /^gpu-b$/" in plan_mod.device_spec(m.devices()["h200-stable-b"]).describe()
    with pytest.raises(MatrixError, match=r"device\[0\]\.host = '\(': not a regular expression"):
        load_matrix(write_matrix(second.replace('host = "^gpu-a$"', 'host = "("')))
