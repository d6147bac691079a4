"""cuTile: one block per (TM x TN) tile of C, a loop over K in TK steps of ct.mma into an fp32 accumulator (tileiras
maps it to wgmma on sm_90, tcgen05 on sm_100), relu and the cast on the way out. Edge tiles are zero-padded on
load and clipped on store. GPU only; compile-only builds for sm_90 / sm_100 on a CPU host (opmatrix.kit.cutile).
cuTile is imported when the kernel is first wanted (this file loads where it is not installed)."""
import functools

from opmatrix.kit import Built, cutile


@functools.cache
def _kernel():
    import cuda.tile as ct

    zero = ct.PaddingMode.ZERO

    @ct.kernel
    def gemm_relu(a, b, c, tm: ct.Constant[int], tn: ct.Constant[int], tk: ct.Constant[int]):
        bm, bn = ct.bid(0), ct.bid(1)
        acc = ct.full((tm, tn), 0.0, dtype=ct.float32)
        for k in range(ct.num_tiles(a, 1, (tm, tk))):
            acc = ct.mma(ct.load(a, (bm, k), (tm, tk), padding_mode=zero),
                         ct.load(b, (k, bn), (tk, tn), padding_mode=zero), acc)
        ct.store(c, (bm, bn), ct.astype(ct.maximum(acc, 0.0), c.dtype))

    return gemm_relu


def _config(dtype: str) -> dict:
    """128 x 128 tiles, 64-deep K steps for 16-bit inputs (32 for fp32: the same bytes per step)."""
    return {"tm": 128, "tn": 128, "tk": 32 if dtype == "float32" else 64}


def build(workload, dtype, device, variant):
    import cuda.tile as ct
    import torch

    config, kernel = _config(dtype), _kernel()
    grid = (-(-workload["M"] // config["tm"]), -(-workload["N"] // config["tn"]), 1)

    def gemm_relu(a, b, out):
        ct.launch(torch.cuda.current_stream(), grid, kernel, (a, b, out, config["tm"], config["tn"], config["tk"]))

    return Built(gemm_relu, config)


def compile_for(workload, dtype, device, variant):
    config = _config(dtype)
    matrix = cutile.array(dtype, 2)
    return cutile.export(_kernel(), [matrix, matrix, matrix, config["tm"], config["tn"], config["tk"]], device,
                         "gemm_relu", config)
