"""Triton: one program per row, the whole row in registers (BLOCK = next power of 2 >= hidden): x + residual
in fp32, h stored to out[1], its sum of squares in fp32, y = h * rsqrt(mean + eps) * w stored to out[0]. h is
never read back."""
import torch
import triton
import triton.language as tl

from opmatrix.kit import Built, load_spec

spec = load_spec(__file__)


@triton.jit
def _add_rmsnorm_kernel(x_ptr, r_ptr, w_ptr, out_ptr, tokens, hidden, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < hidden
    offs = row * hidden + cols
    h = (tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
         + tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float32))
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dtype = out_ptr.dtype.element_ty
    tl.store(out_ptr + tokens * hidden + offs, h.to(dtype), mask=mask)  # out[1]: the new residual
    scale = tl.rsqrt(tl.sum(h * h, axis=0) / hidden + eps)
    tl.store(out_ptr + offs, (h * scale * w).to(dtype), mask=mask)  # out[0]: y


def _num_warps(block: int) -> int:
    return min(16, max(4, block // 512))


def build(workload, dtype, device, variant):
    tokens, hidden = workload["tokens"], workload["hidden"]
    block = triton.next_power_of_2(hidden)
    num_warps = _num_warps(block) if device.is_gpu else 4

    def add_rmsnorm(x, residual, weight, out):
        _add_rmsnorm_kernel[(tokens,)](x, residual, weight, out, tokens, hidden, spec.EPS, BLOCK=block,
                                       num_warps=num_warps)

    return Built(add_rmsnorm, {"BLOCK": block, "num_warps": num_warps})


def compile_for(workload, dtype, device, variant):
    """No host has the device: compile ahead of time for it (CUDA cubin or AMD hsaco)."""
    from opmatrix.kit import aot

    block = triton.next_power_of_2(workload["hidden"])
    return aot.triton_compile_for(_add_rmsnorm_kernel, dtype, {"BLOCK": block}, {"num_warps": _num_warps(block)},
                                  device)
