"""`opmatrix compare` across hosts on a stored fleet run, as a subprocess: the baseline device on host a, a second
baseline host b (the host A/A) and a canary whose driver slows the contestant by 30 % (tests/fleets.py's simulated
night); the verdict, the exit code under --strict, the JUnit file, and the refusals of a wrong or half-named pair of
devices. The comparison's rules on the same rows without a subprocess: tests/unit/test_fleet_compare.py."""
import json
import subprocess
import sys

import numpy as np
import pytest

from opmatrix.core.acceptance import Acceptance
from opmatrix.store import ResultStore, RunManifest
from opmatrix.upgrade import compare
from tests.fleets import host_rows


@pytest.mark.integration  # opmatrix in a subprocess
def test_opmatrix_compare_judges_a_stored_fleet_run_across_hosts(tmp_path):
    rng = np.random.default_rng(5)
    store = ResultStore(tmp_path / "fleet")
    for r in host_rows(rng, "h200-stable", 1.0) + host_rows(rng, "h200-stable-b", 1.0) + \
            host_rows(rng, "h200-canary", 1.0, 1.30):
        store.append(r)
    store.write_manifest(RunManifest(run_id="fleet", started_at="2026-12-02T03:00:00+00:00", baseline="torch",
                                     acceptance=Acceptance(min_speedup=1.05)))

    def compare_cli(*flags):
        return subprocess.run([sys.executable, "-m", "opmatrix", "compare", "fleet", "--reports", str(tmp_path),
                               *flags], capture_output=True, text=True, timeout=120)

    out = compare_cli("--baseline-device", "h200-stable", "--candidate-device", "h200-canary", "--host-aa-device",
                      "h200-stable-b", "--json", "--strict", "--junit", str(tmp_path / "c.xml"))
    assert out.returncode == 1, out.stderr  # a risk, with --strict
    [c] = json.loads(out.stdout)
    assert c["verdict"] == compare.RISK and c["hosts"].startswith("h200-stable (gpu-a) against h200-canary (gpu-c)")
    assert (tmp_path / "c.xml").is_file()
    wrong = compare_cli("--baseline-device", "h200-stable", "--candidate-device", "h200-nope")
    assert wrong.returncode == 2 and "device 'h200-nope' has no rows in this run" in wrong.stderr
    half = compare_cli("--candidate-device", "h200-canary")
    assert half.returncode == 2 and "names both sides" in half.stderr
