"""Triton, head-major: one program per (batch, head of q or k, block of BLOCK_S positions), q's heads first, then
k's, all in one launch. Each program streams a contiguous [BLOCK_S, head_dim] tile of its head (as two halves x1,
x2, in fp32) and the same positions' cos and sin rows, and writes x1 * cos1 - x2 * sin1 and x2 * cos2 + x1 * sin2
(rotate_half without moving data) straight into q's or k's slice of `out`. cos and sin are read by every head of
a position (from L2: 2 MB per table at the Llama prefill shape); q, k and out are each touched once.

On an H200 at llama_prefill, bf16 (lab/h200_memops_sweep.py; reports/20261130-h200-rope/NOTES.md) it is well
ahead of the earlier token-major layout (one program per token and block of 16 heads, 256 B per head row). Masks
cover any position count and an even head_dim whose half is not a power of 2."""
import triton
import triton.language as tl

from opmatrix.kit import Built


@triton.jit
def _rope_kernel(q_ptr, k_ptr, cos_ptr, sin_ptr, out_ptr, seq, heads, kv_heads,
                 HALF: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    total = heads + kv_heads
    b = tl.program_id(1) // total
    h = tl.program_id(1) % total  # a head of out: q's below `heads`, k's from there
    pos = (tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)).to(tl.int64)
    dims = tl.arange(0, BLOCK_D)
    mask = (pos < seq)[:, None] & (dims < HALF)[None, :]
    table = (b * seq + pos)[:, None] * (2 * HALF) + dims[None, :]  # cos and sin are (batch, seq, head_dim)
    c1 = tl.load(cos_ptr + table, mask=mask, other=0.0).to(tl.float32)
    c2 = tl.load(cos_ptr + table + HALF, mask=mask, other=0.0).to(tl.float32)
    s1 = tl.load(sin_ptr + table, mask=mask, other=0.0).to(tl.float32)
    s2 = tl.load(sin_ptr + table + HALF, mask=mask, other=0.0).to(tl.float32)
    if h < heads:
        src = q_ptr + ((b * heads + h) * seq + pos)[:, None] * (2 * HALF) + dims[None, :]
    else:
        src = k_ptr + ((b * kv_heads + h - heads) * seq + pos)[:, None] * (2 * HALF) + dims[None, :]
    x1 = tl.load(src, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(src + HALF, mask=mask, other=0.0).to(tl.float32)
    dst = out_ptr + ((b * total + h) * seq + pos)[:, None] * (2 * HALF) + dims[None, :]
    dtype = out_ptr.dtype.element_ty
    tl.store(dst, (x1 * c1 - x2 * s1).to(dtype), mask=mask)
    tl.store(dst + HALF, (x2 * c2 + x1 * s2).to(dtype), mask=mask)


def _config(workload: dict) -> dict:
    """BLOCK_D = next power of 2 >= head_dim / 2; 16 positions a program (the sweep's best at head_dim 128)."""
    half = workload["head_dim"] // 2
    return {"HALF": half, "BLOCK_S": 16, "BLOCK_D": triton.next_power_of_2(half)}


_NUM_WARPS = 2


def build(workload, dtype, device, variant):
    cfg = _config(workload)
    heads, kv_heads, seq = workload["heads"], workload["kv_heads"], workload["seq"]
    grid = (triton.cdiv(seq, cfg["BLOCK_S"]), workload["batch"] * (heads + kv_heads))

    def rope(q, k, cos, sin, out):
        _rope_kernel[grid](q, k, cos, sin, out, seq, heads, kv_heads, num_warps=_NUM_WARPS, **cfg)

    return Built(rope, dict(cfg, num_warps=_NUM_WARPS))


def compile_for(workload, dtype, device, variant):
    """No host has the device: compile ahead of time for it (CUDA cubin or AMD hsaco)."""
    from opmatrix.kit import aot

    return aot.triton_compile_for(_rope_kernel, dtype, _config(workload), {"num_warps": _NUM_WARPS}, device)
