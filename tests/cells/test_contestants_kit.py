"""Issue 31's Gluon kernels (kernels/rmsnorm/gluon.py, kernels/gemm_relu/gluon.py) built by the test environment's
Triton 3.9 on this CPU host for sm_90, sm_100 and gfx942 (real compiles: marked integration), refusing what they do
not cover. The kit's helpers without a build, and the cubin reader on a small Triton kernel:
tests/unit/test_contestants_kit.py."""
import pytest

from opmatrix import paths
from opmatrix.incell import plugins
from opmatrix.incell.plugins import Unsupported
from tests.contestants import B200, CPU, H200, MI300X


@pytest.mark.integration
def test_gluon_kernels_build_for_hopper_blackwell_and_mi300x_and_refuse_what_they_do_not_cover():
    specs = {k: plugins.load_spec(paths.BUILTIN_KERNELS, k) for k in ("rmsnorm", "gemm_relu")}
    norm = plugins.load_impl(paths.BUILTIN_KERNELS, "rmsnorm", "gluon")
    for device, binary in ((H200, "sm_90 cubin"), (B200, "sm_100 cubin"), (MI300X, "gfx942 hsaco")):
        built = norm.compile_for(specs["rmsnorm"].WORKLOADS["odd_5120"], "bfloat16", device, "default")
        assert built.status == "compiles" and binary in built.what, built.what
    assert built.config["LANES"] == 64 and built.config["BLOCK"] == 8192  # a wavefront is 64 lanes
    gemm = plugins.load_impl(paths.BUILTIN_KERNELS, "gemm_relu", "gluon")
    square = specs["gemm_relu"].WORKLOADS["square_4096"]
    for device in (H200, B200):
        assert gemm.compile_for(square, "float16", device, "default").status == "compiles"
    with pytest.raises(Unsupported, match="MFMA"):
        gemm.compile_for(square, "float16", MI300X, "default")
    with pytest.raises(Unsupported, match="tf32"):
        gemm.compile_for(square, "float32", H200, "default")
    backend = plugins.load_backend(paths.BUILTIN_BACKENDS, "gluon")
    assert "no CPU mode" in backend.covers(CPU)
