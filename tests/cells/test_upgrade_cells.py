"""A real toolchain comparison on the CPU: two toolchains that differ in one real package version (tilelang 0.1.14
vs 0.1.15), in two real nox cell environments, their workers timed in the same rounds by one cell runner; then
`opmatrix compare` reads it. The toolchains are the ones test_nox_cells.py builds (same names, same pins), so the
environments are shared when both run in one checkout (tests.helpers.TILELANG_PINS)."""
import json
import subprocess
import sys
from xml.etree import ElementTree as ET

import pandas as pd
import pytest

from opmatrix.run import run
from opmatrix.scheduling.local import LocalScheduler
from opmatrix.upgrade import compare
from tests.helpers import CPU_DEVICE, TILELANG_PINS

pytestmark = pytest.mark.integration

MATRIX = """
name = "upgrade-cpu"
backends = ["torch", "tilelang"]
[run]
timeout_s = 300
rounds = 10
max_rounds = 10
burst_ms = 5
burst_warmup_ms = 1
""" + CPU_DEVICE + TILELANG_PINS + """[[compare]]
baseline = "tl014"
candidate = "tl015"
[[kernel]]
name = "gemm_relu"
workloads = { cpu = ["tiny_ragged"] }
dtypes = { cpu = ["float32"] }
"""


@pytest.fixture(scope="module")
def upgrade_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("upgrade")
    (root / "upgrade.toml").write_text(MATRIX)
    folder = run(root / "upgrade.toml", reports_dir=root / "reports", run_id="up", scratch_root=root / "scratch",
                 scheduler=LocalScheduler(), keep_scratch=True)  # test_compile_caches_are_the_candidates_own reads them
    return root, folder, pd.read_parquet(folder / "results.parquet")


def test_both_toolchains_are_timed_in_the_same_rounds(upgrade_run):
    _, _, df = upgrade_run
    ok = df[df.status == "ok"]
    assert sorted(set(zip(ok.toolchain, ok.backend, ok.variant))) == [
        ("tl014", "tilelang", "cpu"), ("tl014", "torch", "default"), ("tl015", "tilelang", "cpu"),
        ("tl015", "torch", "default")]
    assert dict(zip(df.toolchain, df.tilelang)) == {"tl014": "0.1.14", "tl015": "0.1.15"}  # each its own env
    candidate = ok[ok.toolchain == "tl015"]
    assert set(candidate.peer_toolchain) == {"tl014"}
    assert all(len(r.peer_round_ms) == len(r.round_ms) == r.rounds >= 10 for r in candidate.itertuples())
    assert len(set(ok.round_group)) == 1  # one contest: every row of both toolchains in the very same rounds


def test_compile_caches_are_the_candidates_own(upgrade_run):
    root, _, _ = upgrade_run
    caches = {cell: list((root / "scratch" / "up" / cell / "jobs").glob("*tilelang*cpu*/cache/tilelang"))
              for cell in ("cpu.tl014", "cpu.tl015")}
    assert all(len(found) == 1 for found in caches.values()), caches


def test_the_comparison_is_written_and_read_back_by_opmatrix_compare(upgrade_run):
    root, folder, _ = upgrade_run
    (stored,) = json.loads((folder / "comparison.json").read_text())
    assert (stored["baseline"], stored["candidate"], stored["paired"]) == ("tl014", "tl015", True)
    assert stored["fingerprint"] == ["cpu: tilelang 0.1.14 -> 0.1.15"]
    assert stored["verdict"] in (compare.SAFE, compare.RISK, compare.BREAKS)
    assert {(r["label"], r["outcome"]) for r in stored["rows"]} >= {("tilelang[tile]", compare.SAME)}
    cases = ET.parse(folder / "comparison.junit.xml").getroot().find("testsuite").findall("testcase")
    assert len(cases) == len(stored["rows"]) >= 4  # one test case per compared row (torch and every tilelang variant)
    junit = root / "cli.xml"
    out = subprocess.run([sys.executable, "-m", "opmatrix", "compare", str(folder), "--json", "--junit", str(junit)],
                         capture_output=True, text=True)
    assert out.returncode == (1 if stored["verdict"] == compare.BREAKS else 0), out.stderr
    assert json.loads(out.stdout)[0]["verdict"] == stored["verdict"] and junit.is_file()
    refused = subprocess.run([sys.executable, "-m", "opmatrix", "compare", str(folder), "--candidate", "nope"],
                             capture_output=True, text=True)
    assert refused.returncode == 2 and "has no paired toolchain comparison of * -> nope" in refused.stderr
