"""Placement, retry and dispatch decisions as pure functions: no Ray cluster, no nox."""
import dataclasses
import socket

import pytest

from opmatrix import plan as plan_mod
from opmatrix.core.jobs import Mode
from opmatrix.matrix import load_matrix
from opmatrix.scheduling import resources
from opmatrix.scheduling.dispatch import SchedulerError, compile_plan, no_host_reason
from opmatrix.scheduling.ray_cluster import MAX_ATTEMPTS, CellRun, after_loss, check_reachable, route, task_options

H200 = "opmatrix.gpu.nvidia.sm_90.NVIDIA-H200"
CPU = "opmatrix.cpu.x86_64.Test-CPU"


@pytest.fixture
def plans(write_matrix):
    m = load_matrix(write_matrix("""
        name = "unit"
        backends = ["torch"]
        [[device]]
        id = "h200"
        vendor = "nvidia"
        arch = "sm_90"
        name = "H200"
        [[device]]
        id = "cpu"
        vendor = "cpu"
        arch = "x86_64"
        [[toolchain]]
        name = "host"
        system = true
        [[toolchain]]
        name = "pinned"
        packages = ["torch==2.13.0"]
        [[kernel]]
        name = "gemm_relu"
        workloads = { nvidia = ["square_4096"], cpu = ["square_512", "ragged_257"] }
        dtypes = { nvidia = ["float16"], cpu = ["float32"] }
        """))
    return {p.cell.id: p for p in plan_mod.cell_plans(m, "u", "/tmp/unit-scratch")}, m


def test_gpu_cell_asks_for_its_device_and_one_gpu_and_shares_the_host(plans):
    p = plans[0]["h200.pinned"]
    assert task_options(p, H200, host_tokens=True) == {
        "num_cpus": 1, "num_gpus": 1, "resources": {H200: 1, resources.HOST: resources.SHARED}}


def test_cpu_timing_cell_holds_its_host_alone(plans):
    p = plans[0]["cpu.pinned"]
    assert task_options(p, CPU, host_tokens=True)["resources"] == {CPU: 1, resources.HOST: 1.0}
    assert task_options(p, CPU, host_tokens=False)["resources"] == {CPU: 1}


def test_compile_only_cell_needs_no_device(plans):
    p = compile_plan(plans[0]["h200.pinned"])
    assert p.mode is Mode.COMPILE
    assert task_options(p, CPU, host_tokens=True) == {
        "num_cpus": 1, "num_gpus": 0, "resources": {resources.HOST: resources.SHARED}}


def test_compile_only_cells_of_one_toolchain_share_an_environment(plans):
    a = compile_plan(plans[0]["h200.pinned"])
    assert a.session.startswith("compile-nvidia-pinned-") and a.session != plans[0]["h200.pinned"].session


def test_no_compile_only_build_without_a_known_arch_or_when_turned_off(plans):
    p = plans[0]["h200.host"]
    assert compile_plan(p).mode is Mode.COMPILE  # a host toolchain builds for it too, with what this host has
    assert compile_plan(p.replace(settings=dataclasses.replace(p.settings, compile_only=False))) is None
    auto = p.replace(cell=dataclasses.replace(p.cell, device=dataclasses.replace(p.cell.device, arch="auto")))
    assert compile_plan(auto) is None
    assert "no host of this run offers device 'h200'" in no_host_reason(p, "here")


def test_route_picks_a_node_resource_matching_the_device(plans):
    _, m = plans
    nodes = [{"Alive": True, "Resources": {H200: 2.0, "CPU": 8}}, {"Alive": False, "Resources": {CPU: 1.0}}]
    assert route(m.device, nodes) == {"h200": H200}


def test_a_lost_cell_is_retried_where_the_device_lives_then_given_up(plans):
    run = CellRun(plans[0]["h200.pinned"], H200)
    retry, why = after_loss(run, {H200: 1.0}, "NodeDiedError")
    assert retry.attempt == 2 and why == "" and retry.plan.jobs == run.plan.jobs
    gone, why = after_loss(run, {}, "NodeDiedError")
    assert gone is None and "no other live node offers" in why
    last = CellRun(run.plan, H200, attempt=MAX_ATTEMPTS)
    gone, why = after_loss(last, {H200: 1.0}, "NodeDiedError")
    assert gone is None and f"lost {MAX_ATTEMPTS} times" in why


def test_a_dead_cluster_address_is_refused_within_seconds():
    with socket.socket() as s:  # a port nothing listens on: bind, then close
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SchedulerError, match="does not answer"):
        check_reachable(f"127.0.0.1:{port}", timeout_s=2)
    with pytest.raises(SchedulerError, match="host:port"):
        check_reachable("ray://nohostport")


def test_run_with_a_dead_address_exits_2_without_a_run_folder(tmp_path, capsys):
    import time

    from opmatrix import cli

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    code = cli.main(["run", "matrix/default.toml", "--address", f"127.0.0.1:{port}", "--run-id", "dead",
                     "--reports", str(tmp_path / "reports")])
    assert code == 2 and time.monotonic() - start < 30
    assert "does not answer" in capsys.readouterr().err
    assert not (tmp_path / "reports" / "dead").exists()


def test_visible_devices_pin_one_gpu_of_a_host_like_any_cuda_program():
    from opmatrix.scheduling.hosts import HostDevice, visible

    gpus = [HostDevice("nvidia", "0", "NVIDIA H200", "sm_90"), HostDevice("nvidia", "1", "NVIDIA H200", "sm_90"),
            HostDevice("amd", "0", "MI300X", "gfx942")]
    assert visible(gpus, {}) == gpus
    assert [g.index for g in visible(gpus, {"CUDA_VISIBLE_DEVICES": "1"}) if g.vendor == "nvidia"] == ["1"]
    assert [g.vendor for g in visible(gpus, {"CUDA_VISIBLE_DEVICES": ""})] == ["amd"]
    assert visible(gpus, {"CUDA_VISIBLE_DEVICES": "GPU-3f2a"}) == gpus  # UUIDs: left to the driver
    assert [g.index for g in visible(gpus, {"HIP_VISIBLE_DEVICES": "1,2"}) if g.vendor == "amd"] == []
