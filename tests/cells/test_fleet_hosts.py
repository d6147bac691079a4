"""Drivers and runtimes as matrix dimensions through the command line, as subprocesses: a [[device]]'s bad driver
range exits 2 before any work, and `opmatrix hosts` explains which device this host is (tests/fleets.py's fleet
matrix). The ranges, host matching, routing and the explanations as pure functions:
tests/unit/test_fleet_hosts.py."""
import subprocess
import sys

import pytest

from tests.fleets import FLEET


@pytest.mark.integration  # opmatrix in a subprocess
def test_a_bad_range_exits_2_before_any_work(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(FLEET.replace('driver = "<590"', 'driver = "590+"'))
    out = subprocess.run([sys.executable, "-m", "opmatrix", "run", str(bad), "--no-ray", "--reports",
                          str(tmp_path / "reports")], capture_output=True, text=True)
    assert out.returncode == 2 and "device[0].driver = '590+': not a version range" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "reports").exists()  # refused before any run folder


@pytest.mark.integration  # opmatrix in a subprocess
def test_the_hosts_command_explains_this_host(tmp_path):
    path = tmp_path / "fleet.toml"
    path.write_text(FLEET)
    out = subprocess.run([sys.executable, "-m", "opmatrix", "hosts", str(path)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.splitlines()[0].endswith("-> cpu"), out.stderr
