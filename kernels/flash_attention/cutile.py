"""cuTile flash attention forward: one block per TM query rows of one (batch, head), a loop over TN-row tiles of K
and V with an online softmax (running max and sum in fp32, exp2 with log2(e) folded into the scale) and two ct.mma
per step, Q K^T (K loaded transposed through `order`) and P V into an fp32 accumulator; tileiras picks the tensor
core instructions (wgmma on sm_90, tcgen05 on sm_100: the row says what the SASS holds), the threads and the loads.

The key tiles split in two loops: the ones wholly visible to every query row of the block run without a mask; the
rest (the causal diagonal, and the tile past the end of a ragged sequence) mask the scores to -inf. Tiles wholly
right of the diagonal are never loaded. Q, K and V are zero-padded past the sequence's end and the store is clipped,
so any sequence length is covered. q, k, v and out are viewed as (batch * heads, seq, head_dim).

16-bit and fp32 inputs (fp32 runs ct.mma in fp32, not tf32), head_dim a power of two up to 128 (ct.arange and tile
shapes are powers of two). GPU only; compile-only builds for sm_90 / sm_100 on a CPU host (opmatrix.kit.cutile).
cuTile is imported when the kernel is first wanted (this file loads where it is not installed)."""
import functools

from opmatrix.kit import Built, Unsupported, cutile, load_spec

spec = load_spec(__file__)

_HEAD_DIMS = (16, 32, 64, 128)
_LOG2E = 1.4426950408889634  # exp(x) = exp2(x * log2(e))


@functools.cache
def _kernel():
    import cuda.tile as ct

    zero = ct.PaddingMode.ZERO

    def step(q, k, v, head, j, acc, m_i, l_i, rows, qk_scale, tm: int, tn: int, d: int, masked: bool, causal: bool):
        """One key tile j: the scores, the online-softmax update and P V; the mask only where `masked`."""
        kt = ct.reshape(ct.load(k, (head, 0, j), (1, d, tn), order=(0, 2, 1), padding_mode=zero), (d, tn))
        qk = ct.mma(q, kt, ct.full((tm, tn), 0.0, dtype=ct.float32))
        if masked:
            cols = j * tn + ct.arange(tn, dtype=ct.int32)[None, :]
            visible = cols < k.shape[1]
            if causal:
                visible = visible & (rows >= cols)
            qk = ct.where(visible, qk, -float("inf"))
        m_new = ct.maximum(m_i, ct.max(qk, axis=1, keepdims=True) * qk_scale)
        p = ct.exp2(qk * qk_scale - m_new)
        alpha = ct.exp2(m_i - m_new)
        vt = ct.reshape(ct.load(v, (head, j, 0), (1, tn, d), padding_mode=zero), (tn, d))
        acc = ct.mma(ct.astype(p, v.dtype), vt, acc * alpha)
        return acc, m_new, l_i * alpha + ct.sum(p, axis=1, keepdims=True)

    @ct.kernel
    def attention(q, k, v, out, scale: ct.Constant[float], tm: ct.Constant[int], tn: ct.Constant[int],
                  d: ct.Constant[int], causal: ct.Constant[bool]):
        block, head = ct.bid(0), ct.bid(1)
        seq = k.shape[1]
        qt = ct.reshape(ct.load(q, (head, block, 0), (1, tm, d), padding_mode=zero), (tm, d))
        rows = block * tm + ct.arange(tm, dtype=ct.int32)[:, None]
        acc = ct.full((tm, d), 0.0, dtype=ct.float32)
        m_i = ct.full((tm, 1), -float("inf"), dtype=ct.float32)
        l_i = ct.full((tm, 1), 0.0, dtype=ct.float32)
        qk_scale = scale * _LOG2E
        clear = seq // tn  # tiles wholly inside the sequence
        end = ct.cdiv(seq, tn)
        if causal:
            clear = min(clear, block * tm // tn)  # tiles wholly left of the diagonal (tm is a multiple of tn)
            end = ct.cdiv(min((block + 1) * tm, seq), tn)
        for j in range(clear):
            acc, m_i, l_i = step(qt, k, v, head, j, acc, m_i, l_i, rows, qk_scale, tm, tn, d, False, causal)
        for j in range(clear, end):
            acc, m_i, l_i = step(qt, k, v, head, j, acc, m_i, l_i, rows, qk_scale, tm, tn, d, True, causal)
        ct.store(out, (head, block, 0), ct.reshape(ct.astype(acc / l_i, out.dtype), (1, tm, d)))

    return attention


def _config(workload) -> dict:
    head_dim = workload["head_dim"]
    if head_dim not in _HEAD_DIMS:
        raise Unsupported(f"head_dim {head_dim}: this cuTile kernel covers {_HEAD_DIMS} (tile shapes are powers of "
                          "two; 128 x 128 fp32 accumulators at most)")
    return {"tm": 128, "tn": 64, "d": head_dim, "causal": workload["causal"]}


def build(workload, dtype, device, variant):
    import cuda.tile as ct
    import torch

    config, kernel = _config(workload), _kernel()
    seq, heads = workload["seq"], workload["batch"] * workload["heads"]
    scale = spec.softmax_scale(workload["head_dim"])
    grid = (-(-seq // config["tm"]), heads, 1)

    def attention(q, k, v, out):
        views = [t.view(heads, seq, config["d"]) for t in (q, k, v, out)]
        ct.launch(torch.cuda.current_stream(), grid, kernel, (*views, scale, config["tm"], config["tn"],
                                                                  config["d"], config["causal"]))

    return Built(attention, config)


def compile_for(workload, dtype, device, variant):
    config = _config(workload)
    tensor = cutile.array(dtype, 3)
    scale = spec.softmax_scale(workload["head_dim"])
    return cutile.export(_kernel(), [tensor, tensor, tensor, tensor, scale, config["tm"], config["tn"], config["d"],
                                     config["causal"]], device, "flash_attention", config)
