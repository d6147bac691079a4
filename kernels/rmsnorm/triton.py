"""Triton: one program per row, the whole row in registers, fp32 sums.

The row is held as a block of A columns (the largest power of 2 <= hidden) and, when hidden is not a power of 2, a
second block of B (the next power of 2 >= the rest). One block of next_power_of_2(hidden) would mask 37.5 % of its
lanes at hidden 5120 (8192 lanes): on an H200 that ran at 78 % of copy bandwidth, the two blocks 4096 + 1024 at
90.6 % (reports/20261130-h200-rmsnorm-bound/NOTES.md, tools/h200_rmsnorm_sweep.py). Warps: 4 for a split row
(8 and 16 measured 82 % and 69 % there), else one per 512 columns, 4 to 16.
"""
import triton
import triton.language as tl

from opmatrix.kit import Built, load_spec

spec = load_spec(__file__)


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, hidden, stride, eps, A: tl.constexpr, B: tl.constexpr):
    row = tl.program_id(0)
    ca = tl.arange(0, A)
    ma = ca < hidden
    xa = tl.load(x_ptr + row * stride + ca, mask=ma, other=0.0).to(tl.float32)
    ss = tl.sum(xa * xa, axis=0)
    if B > 0:
        cb = A + tl.arange(0, B)
        mb = cb < hidden
        xb = tl.load(x_ptr + row * stride + cb, mask=mb, other=0.0).to(tl.float32)
        ss += tl.sum(xb * xb, axis=0)
    scale = tl.rsqrt(ss / hidden + eps)
    wa = tl.load(w_ptr + ca, mask=ma, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + ca, (xa * scale * wa).to(y_ptr.dtype.element_ty), mask=ma)
    if B > 0:
        wb = tl.load(w_ptr + cb, mask=mb, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride + cb, (xb * scale * wb).to(y_ptr.dtype.element_ty), mask=mb)


def _config(hidden: int, gpu: bool) -> dict:
    """The row's two blocks (A, B) and the warps, as the module docstring says."""
    a = 1 << (hidden.bit_length() - 1)
    b = triton.next_power_of_2(hidden - a) if hidden > a else 0
    warps = (4 if b else min(16, max(4, a // 512))) if gpu else 4
    return {"A": a, "B": b, "num_warps": warps}


def build(workload, dtype, device, variant):
    tokens, hidden = workload["tokens"], workload["hidden"]
    config = _config(hidden, device.is_gpu)
    a, b, num_warps = config["A"], config["B"], config["num_warps"]

    def rmsnorm(x, weight, out):
        _rmsnorm_kernel[(tokens,)](x, weight, out, hidden, x.stride(0), spec.EPS, A=a, B=b, num_warps=num_warps)

    return Built(rmsnorm, config)


def compile_for(workload, dtype, device, variant):
    """No host has the device: compile ahead of time for it (CUDA cubin or AMD hsaco)."""
    from opmatrix.kit import aot

    config = _config(workload["hidden"], True)
    return aot.triton_compile_for(_rmsnorm_kernel, dtype, {"A": config["A"], "B": config["B"]},
                                  {"num_warps": config["num_warps"]}, device)
