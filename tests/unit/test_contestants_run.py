"""The committed CPU run of matrix/contestants.toml (reports/20261202-cpu-contestants), read from disk: the coverage
grid of issue 31's contestants. Some of them cannot run in CI's time (FlashInfer alone is ~850 MB and ~3 minutes to
install), so their evidence is this run; the cell tests (tests/cells/test_contestants_cells.py) rebuild the cheaper
part live.

Checked here: every row names the version its cell imported; every compile-only row is a real binary of non-zero
size for the device's arch; every gap is `unsupported` with its reason; the CPU rows that run are correct."""
import re

import pandas as pd
import pytest

from opmatrix import paths
from opmatrix.store import ResultStore, frame

RUN = paths.REPORTS / "20261202-cpu-contestants"
ARCH = {"h200": "sm_90", "b200": "sm_100", "mi300x": "gfx942"}


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    """The committed rows, read (never consolidated into the committed results.parquet: a test writes no file of
    the checkout)."""
    return frame(ResultStore(RUN, create=False).load())


def _row(df, kernel, backend, device, variant="default"):
    hit = df[(df.kernel == kernel) & (df.backend == backend) & (df.device == device) & (df.variant == variant)]
    assert len(hit) == 1, (kernel, backend, device, variant)
    return hit.iloc[0]


def test_every_row_records_the_version_its_cell_imported(rows):
    assert len(rows) == 152 and set(rows.device) == {"cpu", *ARCH}  # 136 + the 16 flash attention rows of its second session
    assert (rows.backend_version != "").all(), rows[rows.backend_version == ""][["kernel", "backend", "device"]]
    versions = dict(zip(rows.backend, rows.backend_version))
    assert versions["cutile"] == "1.7.0" and versions["cute-dsl"] == "4.8.1" and versions["quack"] == "0.6.5"
    assert versions["liger"] == "0.8.5" and versions["helion"] == "1.5.1" and versions["flashinfer"] == "0.7.4"
    assert versions["flash-attn"] == "4.0.0b36" and versions["gluon"] == versions["triton"] == "3.9.0"


def test_every_compile_only_row_is_a_binary_of_nonzero_size_for_its_devices_arch(rows):
    built = rows[rows.status == "compiles"]
    assert len(built) >= 30
    for r in built.itertuples():
        size = re.search(r"\((\d+) bytes\)", r.error)
        assert size and int(size.group(1)) > 0, r.error
        assert re.search(rf"{ARCH[r.device]}a? (cubin|hsaco)", r.error), (r.device, r.error)
    for device, arch in (("h200", "sm_90"), ("b200", "sm_100")):
        for kernel in ("rmsnorm", "gemm_relu"):
            for backend in ("cutile", "cute-dsl", "gluon"):
                assert _row(rows, kernel, backend, device).status == "compiles", (kernel, backend, device)
        assert f"{arch}a cubin by quack" in _row(rows, "rmsnorm", "quack", device).error
        assert "cubin" in _row(rows, "rmsnorm", "liger", device).error
        fa4 = _row(rows, "flash_attention", "flash-attn", device).error
        assert f"{arch}a cubin of FlashAttention 4" in fa4 and ("wgmma" if arch == "sm_90" else "tcgen05") in fa4
    assert "using tcgen05" in _row(rows, "gemm_relu", "cutile", "b200").error
    assert "using wgmma" in _row(rows, "gemm_relu", "cutile", "h200").error
    for device, arch in (("h200", "sm_90"), ("b200", "sm_100")):  # the tile DSLs' own flash attentions
        assert f"{arch} cubin by tileiras" in _row(rows, "flash_attention", "cutile", device).error
        assert f"{arch}a cubin by CuTe DSL using mma.sync" in _row(rows, "flash_attention", "cute-dsl", device).error
        assert _row(rows, "flash_attention", "gluon", device).status == "compiles"
    assert "using wgmma" in _row(rows, "flash_attention", "gluon", "h200", "wgmma").error
    assert "sm_90 only" in _row(rows, "flash_attention", "gluon", "b200", "wgmma").error


def test_every_gap_is_unsupported_with_its_reason(rows):
    for backend in ("cutile", "cute-dsl", "quack", "flashinfer"):
        assert "NVIDIA GPUs only" in _row(rows, "rmsnorm", backend, "cpu").error
    for backend in ("cutile", "cute-dsl", "quack"):
        assert "NVIDIA-only" in _row(rows, "rmsnorm", backend, "mi300x").error
    assert "hsaco" in _row(rows, "rmsnorm", "gluon", "mi300x").error  # Gluon's row kernel builds for AMD too
    assert "MFMA" in _row(rows, "gemm_relu", "gluon", "mi300x").error
    assert "Triton's interpreter" in _row(rows, "swiglu", "liger", "cpu").error
    assert "first half of cos/sin" in _row(rows, "rope", "liger", "h200").error
    assert "aten::mm.dtype" in _row(rows, "gemm_relu", "helion", "cpu").error
    assert "autotuner" in _row(rows, "rmsnorm", "helion", "cpu", "tuned").error
    gaps = rows[rows.status == "unsupported"]
    assert (gaps.error.str.len() > 20).all()
    # FlashInfer builds its kernels with nvcc on the GPU at first call: no compile-only row, a visible no_host
    for device in ARCH:
        assert _row(rows, "rmsnorm", "flashinfer", device).status == "no_host"


def test_the_cpu_rows_that_run_are_checked_against_fp64_and_not_timed_where_an_interpreter_ran(rows):
    helion = _row(rows, "rmsnorm", "helion", "cpu")
    assert helion.status == "ok" and helion.rel_err < helion.tolerance and helion.trials == 3
    assert pd.isna(helion.median_ms)  # interpret mode: correctness only
    assert set(rows[(rows.device == "cpu") & (rows.backend == "triton") & (rows.variant == "default")].status) == {"ok"}
