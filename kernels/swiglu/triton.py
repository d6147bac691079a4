"""Triton: the tensors taken flat (contiguous), one program per BLOCK elements; gate and up loaded as wide
vectors, silu(gate) * up computed in fp32 and rounded once, the activation never written."""
import torch
import triton
import triton.language as tl

from opmatrix.kit import Built


@triton.jit
def _swiglu_kernel(gate_ptr, up_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(gate_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, (g * tl.sigmoid(g) * u).to(out_ptr.dtype.element_ty), mask=mask)


_GPU_CONFIG = {"BLOCK": 4096, "num_warps": 8}  # 16 elements a thread: two 16-byte loads per tensor in fp16/bf16
_INTERPRETER_CONFIG = {"BLOCK": 4096, "num_warps": 4}


def build(workload, dtype, device, variant):
    cfg = dict(_GPU_CONFIG if device.is_gpu else _INTERPRETER_CONFIG)
    n = workload["tokens"] * workload["intermediate"]
    grid = (triton.cdiv(n, cfg["BLOCK"]),)

    def swiglu(gate, up, out):
        _swiglu_kernel[grid](gate, up, out, n, **cfg)

    return Built(swiglu, cfg)


def compile_for(workload, dtype, device, variant):
    """No host has the device: compile ahead of time for it (CUDA cubin or AMD hsaco)."""
    from opmatrix.kit import aot

    return aot.triton_compile_for(_swiglu_kernel, dtype, {"BLOCK": _GPU_CONFIG["BLOCK"]},
                                  {"num_warps": _GPU_CONFIG["num_warps"]}, device)
