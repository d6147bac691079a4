"""TileLang gemm_relu against eager and cuBLASLt on a GPU, in interleaved rounds: the `tile` and `ws` kernels of
kernels/gemm_relu/tilelang.py, each with T.gemm's two warp policies for a 128x256 block: "square"
(TileLang's default: each consumer warpgroup 128x128, two m64n128 wgmmas per k-step) and "full_row" (each
warpgroup 64x256, one m64n256 wgmma, as CUTLASS's Hopper GEMMs do). `ws` is the hand-written producer/consumer
kernel (one wgmma batch in flight, asynchronous TMA-store epilogue); the experiments that led to it, TileLang's
automatic warp specialisation and the hand-written loop storing C from registers, are in this tool as of commit
f3b70b8 (reports/20261201-h200-tilelang-gemm-sweep/NOTES.md).

    python3 lab/h200_tilelang_gemm_sweep.py [ROUNDS [WORKLOAD]] [--only NAME,...]   # project root; torch,
                                                                                      # triton, tilelang
`--only` times eager (always, the baseline) and the named contestants, e.g. `--only blaslt,ws/full_row`.

Timed like opmatrix's cells time rows (triton's do_bench, L2 flushed, median of a burst); each round visits every
contestant of a dtype in a fresh shuffled order, and the speed-up is the median per-round ratio to eager with its
95 % bootstrap interval (opmatrix.decide.stats). Each output is checked against eager's first (the kernel's
tolerance). Issue "Fair verdicts need strong contestants": TileLang gemm_relu >= 1.03x eager at 4096^3."""
import argparse
import sys
from pathlib import Path

import torch

sys.path[:0] = [".", str(Path(__file__).parent)]
from opmatrix import paths  # noqa: E402 - the project root is on the path above
from opmatrix.decide import stats  # noqa: E402
from opmatrix.incell import plugins  # noqa: E402
from h200_sweeps import H200, interleaved_rounds  # noqa: E402 - this file's folder
SPEC = plugins.load_spec(paths.BUILTIN_KERNELS, "gemm_relu")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="TileLang gemm_relu contestants in interleaved rounds")
    parser.add_argument("rounds", nargs="?", type=int, default=15)
    parser.add_argument("workload", nargs="?", default="square_4096", choices=sorted(SPEC.WORKLOADS))
    parser.add_argument("--only", default="", help="comma-separated contestants besides eager (default: all)")
    return parser.parse_args()


ARGS = _arguments()
ROUNDS, WORKLOAD = ARGS.rounds, SPEC.WORKLOADS[ARGS.workload]
ONLY = {name for name in ARGS.only.split(",") if name}


def contestants(dtype: str) -> dict:
    import tilelang

    tl = plugins.load_impl(paths.BUILTIN_KERNELS, "gemm_relu", "tilelang")
    target = tl.aot.tilelang_target(H200)
    M, N, K = WORKLOAD["M"], WORKLOAD["N"], WORKLOAD["K"]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = {name: plugins.load_impl(paths.BUILTIN_KERNELS, "gemm_relu", name).build(WORKLOAD, dtype, H200, "default").fn
           for name in ("torch", "blaslt") if _wanted(name)}
    for policy in ("square", "full_row"):
        if _wanted(f"tile/{policy}"):
            tile = tl._tile_kernel(M, N, K, dtype, **dict(tl._TILE_CONFIG, policy=policy))
            out[f"tile/{policy}"] = _call(tilelang.compile(tile, target=target))
        if _wanted(f"ws/{policy}"):
            ws = tl._ws_kernel(M, N, K, dtype, sms=sms, **dict(tl._WS_CONFIG, policy=policy))
            out[f"ws/{policy}"] = _call(tilelang.compile(ws, target=target))
    return out


def _wanted(name: str) -> bool:
    return not ONLY or name in ONLY or name == "torch"


def _call(kernel):
    def fn(a, b, c):
        kernel(a, b, c)
    return fn


def main() -> None:
    for dtype in ("float16", "bfloat16"):
        a, b = SPEC.make_inputs(WORKLOAD, dtype, "cuda", seed=0)
        fns = contestants(dtype)
        outs = {name: SPEC.make_output(WORKLOAD, dtype, "cuda") for name in fns}
        for name, fn in fns.items():
            fn(a, b, outs[name])
        torch.cuda.synchronize()
        tol = SPEC.tolerance(dtype)
        for name, o in outs.items():
            err = ((o.float() - outs["torch"].float()).abs().max() / outs["torch"].float().abs().max()).item()
            print(f"{dtype} {name}: max error vs eager {err:.2e} ({'ok' if err <= tol else 'WRONG'})", flush=True)
        times = interleaved_rounds({name: lambda n=name: fns[n](a, b, outs[n]) for name in fns}, ROUNDS)
        for name in fns:
            interval = stats.median_interval(stats.ratios(times[name], times["torch"]))
            ms = sorted(times[name])[len(times[name]) // 2]
            print(f"{dtype} {name:14} {ms:.4f} ms  vs eager {interval.text() if interval else '-'}  "
                  f"({ROUNDS} rounds)", flush=True)


if __name__ == "__main__":
    main()
