"""cuTile: one block per row, the whole row as one tile (the next power of 2 >= hidden, zero-padded past the row's
end), fp32 sums. tileiras picks the threads and the loads (TMA where it likes). GPU only; compile-only builds for
sm_90 / sm_100 on a CPU host (opmatrix.kit.cutile)."""
import cuda.tile as ct

from opmatrix.kit import Built, cutile, load_spec

spec = load_spec(__file__)
_ZERO = ct.PaddingMode.ZERO


@ct.kernel
def _rmsnorm(x, w, y, eps: ct.Constant[float], hidden: ct.Constant[int], tile: ct.Constant[int]):
    row = ct.bid(0)
    xt = ct.astype(ct.load(x, (row, 0), (1, tile), padding_mode=_ZERO), ct.float32)
    scale = ct.rsqrt(ct.sum(xt * xt, axis=1, keepdims=True) / hidden + eps)
    wt = ct.reshape(ct.astype(ct.load(w, (0,), (tile,), padding_mode=_ZERO), ct.float32), (1, tile))
    ct.store(y, (row, 0), ct.astype(xt * scale * wt, y.dtype))


def _config(hidden: int) -> dict:
    return {"tile": 1 << (hidden - 1).bit_length()}


def build(workload, dtype, device, variant):
    import torch

    tokens, hidden = workload["tokens"], workload["hidden"]
    config = _config(hidden)

    def rmsnorm(x, weight, out):
        ct.launch(torch.cuda.current_stream(), (tokens, 1, 1), _rmsnorm,
                  (x, weight, out, spec.EPS, hidden, config["tile"]))

    return Built(rmsnorm, config)


def compile_for(workload, dtype, device, variant):
    hidden = workload["hidden"]
    config = _config(hidden)
    row, vec = cutile.array(dtype, 2), cutile.array(dtype, 1)
    return cutile.export(_rmsnorm, [row, vec, row, spec.EPS, hidden, config["tile"]], device, "rmsnorm", config)
