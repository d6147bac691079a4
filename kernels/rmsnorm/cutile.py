"""cuTile: one block per row, the whole row as one tile (the next power of 2 >= hidden, zero-padded past the row's
end), fp32 sums. tileiras picks the threads and the loads (TMA where it likes). GPU only; compile-only builds for
sm_90 / sm_100 on a CPU host (opmatrix.kit.cutile). cuTile is imported when a kernel is first wanted, so this file
loads (and passes its contract check) where cuTile is not installed."""
import functools

from opmatrix.kit import Built, cutile, load_spec

spec = load_spec(__file__)


@functools.cache
def _kernel():
    import cuda.tile as ct

    zero = ct.PaddingMode.ZERO

    @ct.kernel
    def rmsnorm(x, w, y, eps: ct.Constant[float], hidden: ct.Constant[int], tile: ct.Constant[int]):
        row = ct.bid(0)
        xt = ct.astype(ct.load(x, (row, 0), (1, tile), padding_mode=zero), ct.float32)
        scale = ct.rsqrt(ct.sum(xt * xt, axis=1, keepdims=True) / hidden + eps)
        wt = ct.reshape(ct.astype(ct.load(w, (0,), (tile,), padding_mode=zero), ct.float32), (1, tile))
        ct.store(y, (row, 0), ct.astype(xt * scale * wt, y.dtype))

    return rmsnorm


def _config(hidden: int) -> dict:
    return {"tile": 1 << (hidden - 1).bit_length()}


def build(workload, dtype, device, variant):
    import cuda.tile as ct
    import torch

    tokens, hidden = workload["tokens"], workload["hidden"]
    config, kernel = _config(hidden), _kernel()

    def rmsnorm(x, weight, out):
        ct.launch(torch.cuda.current_stream(), (tokens, 1, 1), kernel, (x, weight, out, spec.EPS, hidden,
                                                                          config["tile"]))

    return Built(rmsnorm, config)


def compile_for(workload, dtype, device, variant):
    hidden = workload["hidden"]
    config = _config(hidden)
    row, vec = cutile.array(dtype, 2), cutile.array(dtype, 1)
    return cutile.export(_kernel(), [row, vec, row, spec.EPS, hidden, config["tile"]], device, "rmsnorm", config)
