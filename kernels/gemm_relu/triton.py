"""Triton: one fused kernel, a tiled matmul with fp32 accumulation and relu applied before the store.

Masked loads and stores handle shapes that are not multiples of the block sizes. Grouped tile order (GROUP_M)
keeps neighbouring programs on the same rows of A for L2 reuse. One fixed configuration per device kind."""
import torch
import triton
import triton.language as tl

from opmatrix.kit import Built


@triton.jit
def _gemm_relu_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                      stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * num_n)) % group_size
    pid_n = (pid % (GROUP_M * num_n)) // group_size

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < k_left) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    acc = tl.maximum(acc, 0.0)
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


_GPU_CONFIG = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3}
_INTERPRETER_CONFIG = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 4}


def build(workload, dtype, device, variant):
    cfg = _GPU_CONFIG if device.is_gpu else _INTERPRETER_CONFIG
    M, N, K = workload["M"], workload["N"], workload["K"]
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)

    def gemm_relu(a, b, out):
        _gemm_relu_kernel[grid](a, b, out, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                out.stride(0), out.stride(1), **cfg)

    return Built(gemm_relu, dict(cfg))


def compile_for(workload, dtype, device, variant):
    """No host has the device: compile ahead of time for it (CUDA cubin or AMD hsaco); needs no GPU, no ROCm."""
    from opmatrix.kit import aot

    options = {"num_warps": _GPU_CONFIG["num_warps"], "num_stages": _GPU_CONFIG["num_stages"]}
    constexprs = {k: v for k, v in _GPU_CONFIG.items() if k not in options}
    return aot.triton_compile_for(_gemm_relu_kernel, dtype, constexprs, options, device)
