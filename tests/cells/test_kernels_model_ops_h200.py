"""The Llama decoder's memory-bound ops (kernels/rope, kernels/swiglu, kernels/add_rmsnorm) for an H200, which no
host here has: the Triton and TileLang kernels are built on this CPU host (`compiles`, never run), torch is `no_host`.
The same kernels' CPU rows: test_kernels_model_ops.py (apart so that `--dist loadfile` runs the two side by side)."""
import pytest

from tests.model_ops import H200, KERNELS, run_model_ops

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    return run_model_ops(tmp_path_factory.mktemp("model-ops-h200"), H200)


@pytest.mark.parametrize("kernel", KERNELS)
def test_the_gpu_kernels_build_for_an_h200_no_host_has(rows, kernel):
    _, got = rows
    assert got[(kernel, "h200", "torch")].status == "no_host"
    assert got[(kernel, "h200", "triton")].status == "compiles", got[(kernel, "h200", "triton")].error
    assert "sm_90 cubin" in got[(kernel, "h200", "triton")].error
    tilelang = got[(kernel, "h200", "tilelang")]
    assert tilelang.status == "compiles" and "sm_90a binary" in tilelang.error, tilelang.error

