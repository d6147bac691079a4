"""Real nox cell environments, end to end on the CPU: `opmatrix run` builds one nox environment per cell,
runs every job inside it and stores results as they come.

- two toolchains that differ only in the tilelang pin import different tilelang versions, and say so;
- a toolchain whose packages cannot be installed gives `env_error` rows, not silence.

The default matrix's kernels and backends on this CPU: test_default_style_cpu.py.
"""
import json

import pandas as pd
import pytest

from opmatrix.run import run
from opmatrix.scheduling.local import LocalScheduler
from tests.helpers import CPU_DEVICE, TILELANG_PINS

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def pinned_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("nox")
    matrix = root / "pins.toml"
    matrix.write_text(f"""
name = "pins"
backends = ["tilelang"]
[run]
timeout_s = 300
rep_ms = 5
warmup_ms = 5
max_rounds = 10
{CPU_DEVICE}{TILELANG_PINS}[[toolchain]]
name = "unbuildable"
system = true
packages = ["tilelang==0.0.999"]
[[kernel]]
name = "gemm_relu"
workloads = {{ cpu = ["tiny_ragged"] }}
dtypes = {{ cpu = ["float32"] }}
""")
    run_dir = run(matrix, reports_dir=root / "reports", run_id="pins", scratch_root=root / "scratch",
                  scheduler=LocalScheduler())  # the Ray path is covered by test_ray_cluster.py
    return run_dir, pd.read_parquet(run_dir / "results.parquet")


def test_each_cell_imports_the_tilelang_version_it_pins(pinned_run):
    _, df = pinned_run
    for cell, version in (("cpu.tl014", "0.1.14"), ("cpu.tl015", "0.1.15")):
        rows = df[df.cell == cell]
        assert len(rows) == 4  # variants tile, ws, tuned and cpu
        assert set(rows.tilelang) == {version}, rows[["tilelang", "error"]]
        assert set(rows.backend_version) == {version}


def test_unbuildable_environment_is_reported_per_job(pinned_run):
    run_dir, df = pinned_run
    rows = df[df.cell == "cpu.unbuildable"]
    assert len(rows) == 4 and set(rows.status) == {"env_error"}
    assert "could not be built" in rows.iloc[0].error
    assert "0.0.999" in rows.iloc[0].stderr_tail


def test_environment_is_reused_only_on_exact_match(pinned_run, tmp_path):
    run_dir, _ = pinned_run
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["cells"] == {"cpu.tl014": 4, "cpu.tl015": 4, "cpu.unbuildable": 4}
    # The same cell again: nox reuses the environment and the install marker skips pip entirely.
    matrix = tmp_path / "again.toml"
    matrix.write_text((run_dir / "matrix.toml").read_text().split("[[toolchain]]\nname = \"tl015\"")[0]
                      + '[[kernel]]\nname = "gemm_relu"\nworkloads = { cpu = ["tiny_ragged"] }\n'
                        'dtypes = { cpu = ["float32"] }\n')
    again = run(matrix, reports_dir=tmp_path / "reports", run_id="again", scratch_root=tmp_path / "scratch",
                scheduler=LocalScheduler())
    log = (tmp_path / "scratch" / "again" / "cpu.tl014" / "nox.log").read_text()
    assert "Reusing existing virtual environment" in log and "pip install" not in log
    assert set(pd.read_parquet(again / "results.parquet").tilelang) == {"0.1.14"}

