"""The Llama decoder's memory-bound ops beside attention and the GEMMs (kernels/rope, kernels/swiglu,
kernels/add_rmsnorm), through a real run on this CPU: one matrix (tests/model_ops.py), one cell environment, every
backend's answer.

- torch and torch.compile are `ok` against the fp64 reference, timed;
- Triton is `ok (correctness only)`: its interpreter checks the GPU kernel's arithmetic, its speed means nothing;
- TileLang is `unsupported` on the CPU (GPU kernels only: a gap the coverage grid shows);
- for an H200, which no host here has, the Triton and TileLang kernels are built (`compiles`, never run):
  test_kernels_model_ops_h200.py, the same kernels' matrix with the H200 alone, a file of its own so that
  `--dist loadfile` runs the two halves side by side.
GPU speed is for a run on an H200 (matrix/h200.toml).
The rounds stop at the least there is (max_rounds = 10): the tests read that rows are timed, not how fast; on this CPU
torch.compile's speedup over eager is near the acceptance bar, which would otherwise ask for rounds up to 30 (20-26 s
more a kernel, measured).
"""
import pandas as pd
import pytest

from opmatrix import paths
from opmatrix.incell import plugins
from tests.model_ops import CPU, KERNELS, run_model_ops

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    return run_model_ops(tmp_path_factory.mktemp("model-ops"), CPU)


@pytest.mark.parametrize("kernel", KERNELS)
def test_framework_and_compiled_paths_are_correct_and_timed_on_the_cpu(rows, kernel):
    _, got = rows
    spec = plugins.load_spec(paths.BUILTIN_KERNELS, kernel)
    for backend in ("torch", "torch-compile"):
        r = got[(kernel, "cpu", backend)]
        assert r.status == "ok", (backend, r.error)
        assert r.rel_err < spec.tolerance("float32") and r.bad_elements == 0
        assert r.median_ms > 0 and r.gbps > 0
        assert r.min_bytes == spec.min_bytes(spec.WORKLOADS[KERNELS[kernel]], "float32")
    assert got[(kernel, "cpu", "torch")].speedup_vs_framework == 1.0


@pytest.mark.parametrize("kernel", KERNELS)
def test_triton_is_checked_through_its_interpreter_and_tilelang_is_a_cpu_gap(rows, kernel):
    _, got = rows
    triton = got[(kernel, "cpu", "triton")]
    assert triton.status == "ok", triton.error
    assert triton.timer == "correctness-only" and pd.isna(triton.median_ms)
    assert triton.rel_err < plugins.load_spec(paths.BUILTIN_KERNELS, kernel).tolerance("float32")
    tilelang = got[(kernel, "cpu", "tilelang")]
    assert tilelang.status == "unsupported" and "no CPU implementation" in tilelang.error


def test_the_report_shows_the_three_kernels(rows):
    run_dir, _ = rows
    report = (run_dir / "report.md").read_text()
    for section in ("## Coverage", "## Correctness", "## Performance"):
        assert section in report
    for kernel in KERNELS:
        assert kernel in report
