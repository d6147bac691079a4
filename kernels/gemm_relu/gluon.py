"""Gluon: one program per 128 x 128 tile of C, a loop over K in 32-deep steps; each step loads its A and B tiles
in a coalesced BlockedLayout, converts them to the tensor cores' operand layouts (DotOperandLayout) and issues
warp-level mma.sync (gluon.language.nvidia.ampere.mma_v2) into an fp32 accumulator in the MMA layout; relu and the
cast on the way out. Every layout is written out, which is Gluon's point; no TMA, no wgmma / tcgen05 pipeline
(those are the next step: Hopper's warpgroup MMA needs shared-memory operands and mbarriers).

16-bit inputs only (mma.sync over fp32 inputs would run in tf32, outside fp32's tolerance). NVIDIA only (AMD's
MFMA has its own layouts: a separate kernel). No CPU mode: Gluon has no interpreter."""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import mma_v2

from opmatrix.kit import Built, Unsupported, aot

_TILE = {"BM": 128, "BN": 128, "BK": 32, "WARPS": 8}


@gluon.jit
def _gemm_relu_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
                      WARPS: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [WARPS, 1], [1, 0])
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[WARPS // 2, 2],
                                                  instr_shape=[16, 8])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
    b_layout: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=mma, k_width=2)
    rows = gl.program_id(0) * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, blocked))
    cols = gl.program_id(1) * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, blocked))
    ka = gl.arange(0, BK, layout=gl.SliceLayout(0, blocked))
    kb = gl.arange(0, BK, layout=gl.SliceLayout(1, blocked))
    acc = gl.full([BM, BN], 0.0, gl.float32, layout=mma)
    for k in range(0, K, BK):
        a = gl.load(a_ptr + rows[:, None].to(gl.int64) * K + (k + ka)[None, :],
                    mask=(rows[:, None] < M) & ((k + ka)[None, :] < K), other=0.0)
        b = gl.load(b_ptr + (k + kb)[:, None].to(gl.int64) * N + cols[None, :],
                    mask=((k + kb)[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = mma_v2(gl.convert_layout(a, a_layout), gl.convert_layout(b, b_layout), acc)
    c = gl.convert_layout(gl.where(acc > 0.0, acc, 0.0).to(c_ptr.dtype.element_ty), blocked)
    gl.store(c_ptr + rows[:, None].to(gl.int64) * N + cols[None, :], c, mask=(rows[:, None] < M) & (cols[None, :] < N))


def _check(dtype, device) -> None:
    if dtype == "float32":
        raise Unsupported("this Gluon kernel's mma.sync takes 16-bit inputs; over fp32 it would run in tf32")
    if device.vendor != "nvidia":
        raise Unsupported("this Gluon kernel issues NVIDIA's mma.sync (ampere.mma_v2); an AMD GPU needs one written "
                          "for its MFMA layouts")


def build(workload, dtype, device, variant):
    _check(dtype, device)
    m, n, k = workload["M"], workload["N"], workload["K"]
    grid = (-(-m // _TILE["BM"]), -(-n // _TILE["BN"]))

    def gemm_relu(a, b, out):
        _gemm_relu_kernel[grid](a, b, out, m, n, k, **_TILE, num_warps=_TILE["WARPS"])

    return Built(gemm_relu, dict(_TILE))


def compile_for(workload, dtype, device, variant):
    _check(dtype, device)
    elem = {"float16": "*fp16", "bfloat16": "*bf16"}[dtype]
    signature = {"a_ptr": elem, "b_ptr": elem, "c_ptr": elem, "M": "i32", "N": "i32", "K": "i32",
                 **{name: "constexpr" for name in _TILE}}
    return aot.triton_compile(_gemm_relu_kernel, signature, dict(_TILE), {"num_warps": _TILE["WARPS"]}, device)
