"""Triton: one program per row, the whole row in registers (BLOCK = next power of 2 >= hidden), fp32 sums."""
import torch
import triton
import triton.language as tl

from opmatrix.kit import Built, load_spec

spec = load_spec(__file__)


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, hidden, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < hidden
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    scale = tl.rsqrt(tl.sum(x * x, axis=0) / hidden + eps)
    tl.store(y_ptr + row * stride + cols, (x * scale * w).to(y_ptr.dtype.element_ty), mask=mask)


def build(workload, dtype, device, variant):
    tokens, hidden = workload["tokens"], workload["hidden"]
    block = triton.next_power_of_2(hidden)
    num_warps = min(16, max(4, block // 512)) if device.is_gpu else 4

    def rmsnorm(x, weight, out):
        _rmsnorm_kernel[(tokens,)](x, weight, out, hidden, x.stride(0), spec.EPS, BLOCK=block, num_warps=num_warps)

    return Built(rmsnorm, {"BLOCK": block, "num_warps": num_warps})


def compile_for(workload, dtype, device, variant):
    """No host has the device: compile ahead of time for it (CUDA cubin or AMD hsaco)."""
    from opmatrix.kit import aot

    block = triton.next_power_of_2(workload["hidden"])
    return aot.triton_compile_for(_rmsnorm_kernel, dtype, {"BLOCK": block},
                                  {"num_warps": min(16, max(4, block // 512))}, device)
