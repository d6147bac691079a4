"""Liger-Kernel's SwiGLU forward (liger_kernel.ops.swiglu.swiglu_forward: silu(gate) * up in one kernel), called as
a library; it allocates its output (RETURNS_OUTPUT). Compile-only builds compile the kernel its launcher would pick:
one row per program, or on Blackwell for rows of 16384 and wider its column-tiled kernel (Liger's own rule)."""
from opmatrix.kit import Built, aot, liger

RETURNS_OUTPUT = True


def build(workload, dtype, device, variant):
    import torch
    from liger_kernel.ops.swiglu import swiglu_forward

    def swiglu(gate, up, out):
        return swiglu_forward(gate, up)[2]

    liger.probe(device, lambda: swiglu(torch.ones(1, 8), torch.ones(1, 8), None))
    return Built(swiglu, {"library": "liger_kernel.ops.swiglu.swiglu_forward"})


def compile_for(workload, dtype, device, variant):
    import triton
    from liger_kernel.ops import swiglu
    from liger_kernel.ops.utils import calculate_settings

    n_cols = workload["intermediate"]
    tiled = (device.vendor == "nvidia" and aot.cuda_capability(device.arch) >= 100
             and triton.next_power_of_2(n_cols) >= swiglu._SWIGLU_TILE_MIN_BLOCK)
    block, warps = swiglu._swiglu_tile_settings(n_cols) if tiled else calculate_settings(n_cols)
    elem = {"float16": "*fp16", "bfloat16": "*bf16", "float32": "*fp32"}[dtype]
    signature = {"a_ptr": elem, "b_ptr": elem, "c_ptr": elem, "stride": "i32", "gate_multiplier": "fp32",
                 "n_cols": "i32" if tiled else "constexpr", "BLOCK_SIZE": "constexpr"}
    constexprs = {"BLOCK_SIZE": block} if tiled else {"n_cols": n_cols, "BLOCK_SIZE": block}
    kernel = swiglu._swiglu_forward_kernel_tiled if tiled else swiglu._swiglu_forward_kernel
    compiled = aot.triton_compile(kernel, signature, constexprs, {"num_warps": warps}, device)
    compiled.config["kernel"] = kernel.fn.__name__
    return compiled
