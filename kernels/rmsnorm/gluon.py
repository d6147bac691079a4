"""Gluon: Triton's rmsnorm (kernels/rmsnorm/triton.py) with its layout written out: one program per row, the row as
one block of next_power_of_2(hidden) columns in a BlockedLayout of 16-byte vectors per thread over the program's
warps, fp32 sums. Compile-only builds for NVIDIA and AMD GPUs through triton.compile (no CPU mode: Gluon has no
interpreter)."""
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from opmatrix.kit import ITEMSIZE, Built, aot, load_spec

spec = load_spec(__file__)


@gluon.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, hidden, stride, eps, BLOCK: gl.constexpr, VEC: gl.constexpr,
                    WARPS: gl.constexpr, LANES: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout(size_per_thread=[VEC], threads_per_warp=[LANES],
                                            warps_per_cta=[WARPS], order=[0])
    row = gl.program_id(0).to(gl.int64)
    cols = gl.arange(0, BLOCK, layout=layout)
    mask = cols < hidden
    x = gl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(gl.float32)
    scale = gl.rsqrt(gl.sum(x * x, axis=0) / hidden + eps)
    w = gl.load(w_ptr + cols, mask=mask, other=0.0).to(gl.float32)
    gl.store(y_ptr + row * stride + cols, (x * scale * w).to(y_ptr.dtype.element_ty), mask=mask)


def _config(hidden: int, dtype: str, device) -> dict:
    """The row in 16-byte vectors, one warp per 512 columns (4 to 16); a wavefront is 64 lanes on AMD."""
    block = triton.next_power_of_2(hidden)
    lanes = 64 if device.vendor == "amd" else 32
    vec = min(16 // ITEMSIZE[dtype], max(1, block // lanes))
    return {"BLOCK": block, "VEC": vec, "WARPS": min(16, max(4, block // 512)), "LANES": lanes}


def build(workload, dtype, device, variant):
    tokens, hidden = workload["tokens"], workload["hidden"]
    config = _config(hidden, dtype, device)

    def rmsnorm(x, weight, out):
        _rmsnorm_kernel[(tokens,)](x, weight, out, hidden, x.stride(0), spec.EPS, **config,
                                   num_warps=config["WARPS"])

    return Built(rmsnorm, config)


def compile_for(workload, dtype, device, variant):
    config = _config(workload["hidden"], dtype, device)
    elem = {"float16": "*fp16", "bfloat16": "*bf16", "float32": "*fp32"}[dtype]
    signature = {"x_ptr": elem, "w_ptr": elem, "y_ptr": elem, "hidden": "i32", "stride": "i32", "eps": "fp32",
                 **{name: "constexpr" for name in config}}
    return aot.triton_compile(_rmsnorm_kernel, signature, config, {"num_warps": config["WARPS"]}, device)
