"""A Ray address that answers TCP but is not Ray (issue 29, item 7): a plain listener (it accepts and never says
a word) passed the reachability check, and ray.init then retried for two minutes, deaf to SIGTERM, leaving a run
folder behind. Now the address must answer the HTTP/2 preface as Ray's gRPC servers do, within seconds: refused
with exit 2, no run folder, no traceback; by --address and by RAY_ADDRESS alike."""
from __future__ import annotations

import socket
import time

import pytest

from opmatrix.scheduling.ray_cluster import CONNECT_TIMEOUT_S
from tests.faults import plugins
from tests.faults.harness import opmatrix


@pytest.fixture
def silent_port():
    """A TCP listener that completes every connection (the kernel's backlog) and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


@pytest.mark.parametrize("how", ["--address", "RAY_ADDRESS"])
def test_a_port_that_is_not_ray_is_refused_within_seconds(tmp_path, silent_port, run_id, how, observe):
    matrix = plugins.plain_matrix(tmp_path)
    reports = tmp_path / "reports"
    address = f"127.0.0.1:{silent_port}"
    args = ("--address", address) if how == "--address" else ()
    env = {"RAY_ADDRESS": address} if how == "RAY_ADDRESS" else {}
    started = time.monotonic()
    out = opmatrix("run", matrix, "--run-id", run_id, "--reports", reports, *args, timeout=120, **env)
    took = time.monotonic() - started
    print(f"{how} {address}: exit {out.returncode} after {took:.1f} s: {out.stderr.strip()}")
    observe(f"TCP port that is not Ray ({how})", "exit 2, no folder",
            f"exit {out.returncode}, " + ("folder left" if (reports / run_id).exists() else "no folder"))
    assert out.returncode == 2, out.stderr
    assert "accepts TCP connections but is not a Ray cluster" in out.stderr and "Traceback" not in out.stderr
    assert not (reports / run_id).exists()
    assert took < CONNECT_TIMEOUT_S + 60  # its own limit plus starting Python on a loaded machine; ray.init took 122 s
