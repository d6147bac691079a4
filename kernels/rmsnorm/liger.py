"""Liger-Kernel's RMSNorm forward (liger_kernel.ops.rms_norm.rms_norm_forward, casting mode "llama", the default of
its LigerRMSNorm module: fp32 statistics, the normalised row cast to the input dtype before the weight), called as a
library; it allocates its output (RETURNS_OUTPUT). Compile-only builds compile the library's row kernel with the
block size and warps its launcher would choose (liger_kernel.ops.utils.calculate_settings)."""
from opmatrix.kit import Built, Unsupported, aot, liger, load_spec

spec = load_spec(__file__)
RETURNS_OUTPUT = True
_CASTING = "llama"


def build(workload, dtype, device, variant):
    import torch
    from liger_kernel.ops.rms_norm import rms_norm_forward

    def rmsnorm(x, weight, out):
        return rms_norm_forward(x, weight, spec.EPS, 0.0, _CASTING, None)[0]

    liger.probe(device, lambda: rmsnorm(torch.ones(1, 8), torch.ones(8), None))
    return Built(rmsnorm, {"library": "liger_kernel.ops.rms_norm.rms_norm_forward", "casting_mode": _CASTING})


def compile_for(workload, dtype, device, variant):
    from liger_kernel.ops import rms_norm
    from liger_kernel.ops.utils import calculate_settings

    block, warps = calculate_settings(workload["hidden"])
    if not (block > 256 or workload["tokens"] < 4096 * 8):
        raise Unsupported("the compile-only build covers Liger's one-row-per-program kernel; for this shape its "
                          "launcher picks the multi-row kernel")
    elem = {"float16": "*fp16", "bfloat16": "*bf16", "float32": "*fp32"}[dtype]
    signature = {"Y_ptr": elem, "Y_row_stride": "i32", "X_ptr": elem, "X_row_stride": "i32", "W_ptr": elem,
                 "W_row_stride": "i32", "RSTD_ptr": "*fp32", "RSTD_row_stride": "i32", "n_cols": "i32",
                 "eps": "fp32", "offset": "fp32", "casting_mode": "constexpr", "elementwise_affine": "constexpr",
                 "BLOCK_SIZE": "constexpr"}
    constexprs = {"casting_mode": rms_norm._str_to_casting_mode[_CASTING], "elementwise_affine": True,
                  "BLOCK_SIZE": block}
    return aot.triton_compile(rms_norm._rms_norm_forward_kernel, signature, constexprs, {"num_warps": warps},
                              device)
