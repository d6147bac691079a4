"""Real nox cell environments, end to end on the CPU: `opmatrix run` builds one nox environment per cell,
runs every job inside it and stores results as they come.

- two toolchains that differ only in the tilelang pin import different tilelang versions, and say so;
- a toolchain whose packages cannot be installed gives `env_error` rows, not silence;
- the real gemm_relu kernel runs through all four backends; a fleet device absent here is `no_host`.
"""
import json
import re

import pandas as pd
import pytest

from opmatrix.run import run
from opmatrix.scheduling.local import LocalScheduler

pytestmark = pytest.mark.integration

CPU_DEVICE = """
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
"""


@pytest.fixture(scope="module")
def pinned_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("nox")
    matrix = root / "pins.toml"
    matrix.write_text(f"""
name = "pins"
backends = ["tilelang"]
[run]
timeout_s = 300
{CPU_DEVICE}
[[toolchain]]
name = "tl014"
system = true
packages = ["tilelang==0.1.14"]
[[toolchain]]
name = "tl015"
system = true
packages = ["tilelang==0.1.15"]
[[toolchain]]
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
        assert len(rows) == 3  # variants tile, tuned and cpu
        assert set(rows.tilelang) == {version}, rows[["tilelang", "error"]]
        assert set(rows.backend_version) == {version}


def test_unbuildable_environment_is_reported_per_job(pinned_run):
    run_dir, df = pinned_run
    rows = df[df.cell == "cpu.unbuildable"]
    assert len(rows) == 3 and set(rows.status) == {"env_error"}
    assert "could not be built" in rows.iloc[0].error
    assert "0.0.999" in rows.iloc[0].stderr_tail


def test_environment_is_reused_only_on_exact_match(pinned_run, tmp_path):
    run_dir, _ = pinned_run
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["cells"] == {"cpu.tl014": 3, "cpu.tl015": 3, "cpu.unbuildable": 3}
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


def test_default_style_matrix_runs_every_backend_on_cpu(tmp_path):
    matrix = tmp_path / "cpu.toml"
    matrix.write_text(f"""
name = "cpu-all"
backends = ["torch", "torch-compile", "cutlass", "tilelang", "triton"]
[run]
timeout_s = 300
rep_ms = 20
{CPU_DEVICE}
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
[[toolchain]]
name = "host"
system = true
[[kernel]]
name = "gemm_relu"
workloads = {{ cpu = ["tiny_ragged"], nvidia = ["square_4096"], amd = ["square_4096"] }}
dtypes = {{ cpu = ["float32"], nvidia = ["float16"], amd = ["bfloat16"] }}
[[kernel]]
name = "rmsnorm"
backends = ["torch", "tilelang", "triton"]
workloads = {{ cpu = ["ragged_1000"], nvidia = ["odd_5120"] }}
dtypes = {{ cpu = ["float32"], nvidia = ["bfloat16"] }}
[[kernel]]
name = "flash_attention"
backends = ["torch", "tilelang", "triton"]
workloads = {{ cpu = ["b1_h2_s127_d64_causal"], nvidia = ["b8_h32_s4096_d128_causal"] }}
dtypes = {{ cpu = ["float32"], nvidia = ["float16"] }}
[[exclude]]
kernel = "flash_attention"
variant = "tuned"
reason = "the same compile-only path as gemm_relu's tuned variant; saves a build"
""")
    run_dir = run(matrix, reports_dir=tmp_path / "reports", run_id="cpu-all", scratch_root=tmp_path / "scratch",
                  scheduler=LocalScheduler())  # embedded Ray is covered by test_ray_cluster.py
    full = pd.read_parquet(run_dir / "results.parquet")
    norm = {(r.device, r.backend): r for r in full[full.kernel == "rmsnorm"].itertuples()}
    assert norm[("cpu", "torch")].status == "ok" and norm[("cpu", "torch")].rel_err < 1e-5
    assert norm[("cpu", "triton")].status == "ok" and norm[("cpu", "triton")].timer == "correctness-only"
    assert norm[("cpu", "tilelang")].status == "unsupported"  # a gap: the CPU needs its own implementation
    assert norm[("h200", "tilelang")].status == "compiles" and norm[("h200", "triton")].status == "compiles"
    assert norm[("h200", "torch")].status == "no_host"
    attn = {(r.device, r.backend, r.variant): r for r in full[full.kernel == "flash_attention"].itertuples()}
    assert attn[("cpu", "torch", "math")].status == "ok" and attn[("cpu", "torch", "math")].rel_err < 1e-5
    assert attn[("cpu", "torch", "cudnn")].status == "unsupported"  # each SDPA backend is its own row
    assert attn[("cpu", "triton", "default")].status == "ok" and attn[("cpu", "triton", "default")].rel_err < 1e-5
    assert attn[("h200", "triton", "default")].status == "compiles"
    assert attn[("h200", "tilelang", "fixed")].status == "compiles"
    assert "sm_90a binary using wgmma" in attn[("h200", "tilelang", "fixed")].error
    assert attn[("cpu", "tilelang", "fixed")].status == "unsupported"
    df = full[full.kernel == "gemm_relu"]
    got = {(r.device, r.backend, r.variant): r for r in df.itertuples()}
    for backend in ("torch", "torch-compile"):
        r = got[("cpu", backend, "default")]
        assert r.status == "ok" and r.median_ms > 0 and r.rel_err < 1e-5, r.error
    assert got[("cpu", "tilelang", "cpu")].status == "ok"
    assert got[("cpu", "tilelang", "tile")].status == "unsupported"
    assert got[("cpu", "tilelang", "tuned")].status == "unsupported"
    assert "needs the separate 'cpu' implementation" in got[("cpu", "tilelang", "tile")].error
    triton = got[("cpu", "triton", "default")]
    assert triton.status == "ok" and triton.timer == "correctness-only" and pd.isna(triton.median_ms)
    assert got[("cpu", "torch", "default")].speedup_vs_framework == 1.0
    # No GPU here: each GPU job is still a row; where the implementation can build for the device, it is built on
    # this CPU host (compiles: a binary; lowers: device source only) and never run.
    for device in ("h200", "mi300x"):
        assert len(df[df.device == device]) == 7
        assert got[(device, "torch", "default")].status == "no_host"
        assert got[(device, "torch-compile", "default")].status == "no_host"
        assert got[(device, "tilelang", "cpu")].status == "unsupported"
        assert got[(device, "triton", "default")].status == "compiles"
        assert got[(device, "triton", "default")].median_ms != got[(device, "triton", "default")].median_ms  # NaN
    assert "sm_90a binary using wgmma" in got[("h200", "tilelang", "tile")].error
    assert got[("h200", "tilelang", "tile")].status == "compiles"
    assert got[("h200", "tilelang", "tuned")].status == "compiles"  # its source, at the fixed configuration
    assert "sm_90 cubin using wgmma" in got[("h200", "triton", "default")].error
    assert got[("mi300x", "tilelang", "tile")].status == "lowers"  # HIP source; no hipcc here for a binary
    # CUTLASS: nvcc builds the sm_90a library here (never run); the CPU and AMD need other implementations.
    assert got[("h200", "cutlass", "default")].status == "compiles"
    assert "sm_90a shared library" in got[("h200", "cutlass", "default")].error
    assert got[("cpu", "cutlass", "default")].status == "unsupported"
    assert "NVIDIA-only" in got[("mi300x", "cutlass", "default")].error
    assert "gfx942 hsaco" in got[("mi300x", "triton", "default")].error
    report = (run_dir / "report.md").read_text()
    for section in ("## Coverage", "## Correctness", "## Performance", "## Not run, unsupported or failed"):
        assert section in report
    coverage_row = re.search(r"^\| gemm_relu +\| tilelang\[tile\] +\|(.*)\|$", report, re.MULTILINE)
    assert [c.strip() for c in coverage_row.group(1).split("|")] == ["unsupported", "compiles", "lowers"]
