"""Triton decode attention, split over the cache (flash-decoding): with one query token per sequence there are only
batch x kv_heads (query block, key) pairs, far fewer programs than a GPU has SMs, so each KV head's cache is cut
into SPLITS chunks, each program streams its chunk in BLOCK_N tiles with an online softmax in fp32 and leaves a
partial (max, sum, unnormalised output); a second kernel combines a head's partials. The query heads that share a
KV head (grouped-query) are one block of rows of a program's tl.dot, padded to 16 (the least a dot takes), so the
cache is read once for all of them. Any cache length (masked tiles); head_dim a power of two.
On a CPU Triton's interpreter checks the arithmetic (correctness only); the GPU's speed is for a GPU run
(matrix/h200-contestants.toml)."""
import triton
import triton.language as tl

from opmatrix.kit import Built, load_spec

spec = load_spec(__file__)


@triton.jit
def _partial_kernel(q_ptr, k_ptr, v_ptr, acc_ptr, m_ptr, l_ptr, kv_len, chunk, qk_scale, GROUP: tl.constexpr,
                    ROWS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, SPLITS: tl.constexpr):
    pair, split = tl.program_id(0), tl.program_id(1)  # pair: batch x kv_heads + kv_head
    rows = tl.arange(0, ROWS)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    # q is (batch, heads, 1, d): the GROUP query heads of this KV head are rows pair*GROUP .. of a (batch*heads, d)
    q = tl.load(q_ptr + (pair * GROUP + rows[:, None]) * HEAD_DIM + offs_d[None, :], mask=rows[:, None] < GROUP,
                other=0.0)
    kv_base = pair * kv_len * HEAD_DIM
    lo = split * chunk
    hi = tl.minimum(lo + chunk, kv_len)
    m_i = tl.full((ROWS,), float("-inf"), tl.float32)
    l_i = tl.zeros((ROWS,), tl.float32)
    acc = tl.zeros((ROWS, HEAD_DIM), tl.float32)
    for start in range(lo, hi, BLOCK_N):
        cols = start + offs_n
        inside = cols < hi
        k = tl.load(k_ptr + kv_base + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=inside[None, :], other=0.0)
        v = tl.load(v_ptr + kv_base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=inside[:, None], other=0.0)
        qk = tl.where(inside[None, :], tl.dot(q, k) * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    out = (pair * SPLITS + split) * ROWS + rows
    tl.store(acc_ptr + out[:, None] * HEAD_DIM + offs_d[None, :], acc)
    tl.store(m_ptr + out, m_i)
    tl.store(l_ptr + out, l_i)


@triton.jit
def _combine_kernel(acc_ptr, m_ptr, l_ptr, o_ptr, GROUP: tl.constexpr, ROWS: tl.constexpr, HEAD_DIM: tl.constexpr,
                    SPLITS: tl.constexpr):
    head = tl.program_id(0)  # batch x heads + head
    pair, row = head // GROUP, head % GROUP
    splits = tl.arange(0, SPLITS)
    offs_d = tl.arange(0, HEAD_DIM)
    at = (pair * SPLITS + splits) * ROWS + row
    m = tl.load(m_ptr + at)
    weight = tl.math.exp2(m - tl.max(m, 0))  # an empty chunk (m = -inf) weighs 0
    total = tl.sum(tl.load(l_ptr + at) * weight, 0)
    acc = tl.sum(tl.load(acc_ptr + at[:, None] * HEAD_DIM + offs_d[None, :]) * weight[:, None], 0)
    tl.store(o_ptr + head * HEAD_DIM + offs_d, (acc / total).to(o_ptr.dtype.element_ty))


_GPU = {"BLOCK_N": 64, "chunk": 512, "num_warps": 4}
_INTERPRETER = {"BLOCK_N": 16, "chunk": 48, "num_warps": 4}


def _plan(workload, cfg) -> dict:
    """The launch of a workload: query heads a KV head serves, the rows they pad to, splits (a power of two: the
    combine's tl.arange) and the cache positions each takes."""
    group = workload["heads"] // workload["kv_heads"]
    splits = triton.next_power_of_2(triton.cdiv(workload["kv_len"], cfg["chunk"]))
    return {"GROUP": group, "ROWS": max(16, triton.next_power_of_2(group)), "SPLITS": splits,
            "chunk": triton.cdiv(workload["kv_len"], splits)}


def build(workload, dtype, device, variant):
    import torch

    batch, heads, kv_len, head_dim = workload["batch"], workload["heads"], workload["kv_len"], workload["head_dim"]
    cfg = _GPU if device.is_gpu else _INTERPRETER
    plan = _plan(workload, cfg)
    group, rows, splits, chunk = plan["GROUP"], plan["ROWS"], plan["SPLITS"], plan["chunk"]
    pairs = batch * workload["kv_heads"]
    scratch = dict(device=device.torch, dtype=torch.float32)
    acc = torch.empty(pairs * splits * rows, head_dim, **scratch)  # the partials: made here, never timed
    m, l_ = torch.empty(pairs * splits * rows, **scratch), torch.empty(pairs * splits * rows, **scratch)
    qk_scale = spec.softmax_scale(head_dim) * 1.4426950408889634  # exp(x) = exp2(x * log2(e))

    def attention(q, k, v, out):
        _partial_kernel[(pairs, splits)](q, k, v, acc, m, l_, kv_len, chunk, qk_scale, GROUP=group, ROWS=rows,
                                         HEAD_DIM=head_dim, BLOCK_N=cfg["BLOCK_N"], SPLITS=splits,
                                         num_warps=cfg["num_warps"])
        _combine_kernel[(batch * heads,)](acc, m, l_, out, GROUP=group, ROWS=rows, HEAD_DIM=head_dim, SPLITS=splits)

    return Built(attention, dict(plan, BLOCK_N=cfg["BLOCK_N"], num_warps=cfg["num_warps"]))


def compile_for(workload, dtype, device, variant):
    """No host has the device: the kernel that reads the cache (the split one), built for it."""
    from opmatrix.kit import aot

    elem = {"float16": "*fp16", "bfloat16": "*bf16", "float32": "*fp32"}[dtype]
    plan = _plan(workload, _GPU)
    constexprs = {"GROUP": plan["GROUP"], "ROWS": plan["ROWS"], "HEAD_DIM": workload["head_dim"],
                  "BLOCK_N": _GPU["BLOCK_N"], "SPLITS": plan["SPLITS"]}
    signature = {"q_ptr": elem, "k_ptr": elem, "v_ptr": elem, "acc_ptr": "*fp32", "m_ptr": "*fp32", "l_ptr": "*fp32",
                 "kv_len": "i32", "chunk": "i32", "qk_scale": "fp32", **{name: "constexpr" for name in constexprs}}
    return aot.triton_compile(_partial_kernel, signature, constexprs, {"num_warps": _GPU["num_warps"]}, device)
