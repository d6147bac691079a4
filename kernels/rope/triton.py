"""Triton: one program per (token, block of heads), q's head blocks first, then k's, all in one launch. The
token's cos and sin rows are loaded once per program (as two halves, fp32) and applied to BLOCK_H heads at a
time: each head's halves x1, x2 give x1 * cos1 - x2 * sin1 and x2 * cos2 + x1 * sin2 (rotate_half without
moving data), written straight into q's or k's slice of `out`. Masks cover any head count and an even head_dim
whose half is not a power of 2."""
import torch
import triton
import triton.language as tl

from opmatrix.kit import Built


@triton.jit
def _rope_heads(src_ptr, out_ptr, c1, c2, s1, s2, b, s, seq, src_heads, out_heads, head0, out_head0,
                HALF: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    """BLOCK_H heads from head0 of src (batch b, position s) into out's heads from out_head0 + head0."""
    heads = head0 + tl.arange(0, BLOCK_H)
    dims = tl.arange(0, BLOCK_D)
    mask = (heads < src_heads)[:, None] & (dims < HALF)[None, :]
    src = ((b * src_heads + heads[:, None]) * seq + s) * (2 * HALF) + dims[None, :]
    x1 = tl.load(src_ptr + src, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(src_ptr + src + HALF, mask=mask, other=0.0).to(tl.float32)
    dst = ((b * out_heads + out_head0 + heads[:, None]) * seq + s) * (2 * HALF) + dims[None, :]
    dtype = out_ptr.dtype.element_ty
    tl.store(out_ptr + dst, (x1 * c1[None, :] - x2 * s1[None, :]).to(dtype), mask=mask)
    tl.store(out_ptr + dst + HALF, (x2 * c2[None, :] + x1 * s2[None, :]).to(dtype), mask=mask)


@triton.jit
def _rope_kernel(q_ptr, k_ptr, cos_ptr, sin_ptr, out_ptr, seq, heads, kv_heads, q_blocks,
                 HALF: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    token = tl.program_id(0).to(tl.int64)  # batch * seq + position: cos and sin are (batch, seq, head_dim)
    block = tl.program_id(1)
    b = token // seq
    s = token % seq
    dims = tl.arange(0, BLOCK_D)
    dmask = dims < HALF
    row = token * (2 * HALF) + dims
    c1 = tl.load(cos_ptr + row, mask=dmask, other=0.0).to(tl.float32)
    c2 = tl.load(cos_ptr + row + HALF, mask=dmask, other=0.0).to(tl.float32)
    s1 = tl.load(sin_ptr + row, mask=dmask, other=0.0).to(tl.float32)
    s2 = tl.load(sin_ptr + row + HALF, mask=dmask, other=0.0).to(tl.float32)
    if block < q_blocks:
        _rope_heads(q_ptr, out_ptr, c1, c2, s1, s2, b, s, seq, heads, heads + kv_heads, block * BLOCK_H, 0,
                    HALF, BLOCK_H, BLOCK_D)
    else:
        _rope_heads(k_ptr, out_ptr, c1, c2, s1, s2, b, s, seq, kv_heads, heads + kv_heads,
                    (block - q_blocks) * BLOCK_H, heads, HALF, BLOCK_H, BLOCK_D)


def _config(workload: dict) -> dict:
    """About 2K elements per program: BLOCK_H heads (at most 16, and no more than the smaller head count, so k's
    blocks of a GQA shape are not mostly masked) of BLOCK_D = next power of 2 >= head_dim / 2, twice."""
    half = workload["head_dim"] // 2
    block_d = triton.next_power_of_2(half)
    block_h = min(16, triton.next_power_of_2(min(workload["heads"], workload["kv_heads"])), max(1, 1024 // block_d))
    return {"HALF": half, "BLOCK_H": block_h, "BLOCK_D": block_d}


def build(workload, dtype, device, variant):
    cfg = _config(workload)
    heads, kv_heads, seq = workload["heads"], workload["kv_heads"], workload["seq"]
    q_blocks = triton.cdiv(heads, cfg["BLOCK_H"])
    grid = (workload["batch"] * seq, q_blocks + triton.cdiv(kv_heads, cfg["BLOCK_H"]))
    num_warps = 4

    def rope(q, k, cos, sin, out):
        _rope_kernel[grid](q, k, cos, sin, out, seq, heads, kv_heads, q_blocks, num_warps=num_warps, **cfg)

    return Built(rope, dict(cfg, num_warps=num_warps))


def compile_for(workload, dtype, device, variant):
    """No host has the device: compile ahead of time for it (CUDA cubin or AMD hsaco)."""
    from opmatrix.kit import aot

    return aot.triton_compile_for(_rope_kernel, dtype, _config(workload), {"num_warps": 4}, device)
