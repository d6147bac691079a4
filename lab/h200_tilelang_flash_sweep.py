"""TileLang flash attention forward against cuDNN's SDPA back-end on a GPU, in interleaved rounds: the design
choices of the `fa3` kernel of kernels/flash_attention/tilelang.py (FlashAttention-3's intra-warpgroup overlap of
one block's softmax with the previous block's P V, ping-pong between the consumer warpgroups, K/V block width,
the epilogue: O from registers or through shared memory and a TMA store, the `-tma` designs),
each built with the kernel's own `_fa3_kernel`, and optionally the committed variants themselves.

    python3 lab/h200_tilelang_flash_sweep.py [ROUNDS [WORKLOAD ...]] [--designs A,B] [--variants fa3]
                                              # project root; torch, triton, tilelang

Timed like opmatrix's cells time rows (triton's do_bench, L2 flushed, median of a burst); each round visits every
contestant of a (workload, dtype) in a fresh shuffled order, and the speed-up is the median per-round ratio to
cuDNN with its 95 % bootstrap interval (opmatrix.decide.stats). Every output is first checked against the fp64
reference of kernels/flash_attention/spec.py on the small workloads (poisoned outputs, a ragged causal one) and
against cuDNN's output (the spec's tolerance) on the timed ones. Issue "Fair verdicts need strong contestants":
TileLang >= 1.0x cuDNN: reports/20261201-h200-tilelang-flash-sweep/NOTES.md."""
import argparse
import sys
from pathlib import Path

import torch

sys.path[:0] = [".", str(Path(__file__).parent)]
from opmatrix import paths  # noqa: E402 - the project root is on the path above
from opmatrix.decide import stats  # noqa: E402
from opmatrix.incell import plugins  # noqa: E402
from h200_sweeps import H200, interleaved_rounds  # noqa: E402 - this file's folder
SPEC = plugins.load_spec(paths.BUILTIN_KERNELS, "flash_attention")
TIMED = ["b8_h32_s4096_d128", "b8_h32_s4096_d128_causal", "b1_h32_s8192_d128", "b1_h32_s8192_d128_causal"]
SMALL = ["b1_h2_s128_d64", "b1_h2_s127_d64_causal"]
# every design the NOTES compare (its logs each timed a subset: the tool's DESIGNS at the time)
DESIGNS = {"overlap": {"block_N": 128, "stages": 2, "pingpong": False},
           "pingpong": {"block_N": 128, "stages": 2, "pingpong": True},
           "pingpong176": {"block_N": 176, "stages": 2, "pingpong": True},
           "pingpong176-lpt": {"block_N": 176, "stages": 2, "pingpong": True, "lpt": True},
           "pingpong128-lpt": {"block_N": 128, "stages": 2, "pingpong": True, "lpt": True},
           "pingpong-tma": {"block_N": 128, "stages": 2, "pingpong": True, "tma_epilogue": True},
           "pingpong176-lpt-tma": {"block_N": 176, "stages": 2, "pingpong": True, "lpt": True, "tma_epilogue": True}}


def _compiled(kernel):
    def attention(q, k, v, o):
        kernel(q, k, v, o)
    return attention


def contestants(workload: dict, dtype: str, designs=tuple(DESIGNS), variants=()) -> dict:
    """cuDNN, the committed TileLang `variants` and one kernel per named design of DESIGNS."""
    import tilelang

    tl = plugins.load_impl(paths.BUILTIN_KERNELS, "flash_attention", "tilelang")
    sdpa = plugins.load_impl(paths.BUILTIN_KERNELS, "flash_attention", "torch")
    target = tl.aot.tilelang_target(H200)
    out = {"torch[cudnn]": sdpa.build(workload, dtype, H200, "cudnn").fn}
    out.update({f"tilelang[{v}]": tl.build(workload, dtype, H200, v).fn for v in variants})
    for name in designs:
        out[f"design/{name}"] = _compiled(tilelang.compile(tl._fa3_func(workload, dtype, DESIGNS[name]),
                                                           target=target, pass_configs=tl._FA3_PASSES))
    return out


def call(fn, inputs, out):
    result = fn(*inputs, out)
    return out if result is None else result


def max_error(got, want) -> float:
    return ((got.double() - want.double()).abs().max() / want.double().abs().max()).item()


def check_small(choice: dict) -> None:
    for name in SMALL:
        w = SPEC.WORKLOADS[name]
        for dtype in ("float16", "bfloat16"):
            inputs = SPEC.make_inputs(w, dtype, "cuda", seed=0)
            want = SPEC.reference(inputs, w)
            for cname, fn in contestants(w, dtype, **choice).items():
                out = torch.full_like(inputs[0], float("nan"))  # poisoned: a row never written shows
                err = max_error(call(fn, inputs, out), want)
                print(f"{name} {dtype} {cname}: max error vs fp64 {err:.2e} "
                      f"({'ok' if err <= SPEC.tolerance(dtype) else 'WRONG'})", flush=True)


def sweep(name: str, dtype: str, rounds: int, choice: dict) -> None:
    w = SPEC.WORKLOADS[name]
    inputs = SPEC.make_inputs(w, dtype, "cuda", seed=0)
    fns = contestants(w, dtype, **choice)
    outs = {cname: torch.full_like(inputs[0], float("nan")) for cname in fns}
    first = {cname: call(fn, inputs, outs[cname]) for cname, fn in fns.items()}
    for cname, got in first.items():
        err = max_error(got, first["torch[cudnn]"])
        print(f"{name} {dtype} {cname}: max error vs cuDNN {err:.2e} "
              f"({'ok' if err <= SPEC.tolerance(dtype) else 'WRONG'})", flush=True)
    times = interleaved_rounds({cname: lambda c=cname: call(fns[c], inputs, outs[c]) for cname in fns}, rounds)
    for cname in fns:
        interval = stats.median_interval(stats.ratios(times[cname], times["torch[cudnn]"]))
        ms = sorted(times[cname])[len(times[cname]) // 2]
        tflops = SPEC.flops(w) / ms / 1e9
        print(f"{name} {dtype} {cname:18} {ms:.4f} ms {tflops:5.0f} TFLOP/s  speed-up over cuDNN "
              f"{interval.text() if interval else '-'}  ({rounds} rounds)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rounds", type=int, nargs="?", default=10)
    parser.add_argument("workloads", nargs="*", default=TIMED)
    parser.add_argument("--designs", default=",".join(DESIGNS), help="comma-separated names of DESIGNS ('' none)")
    parser.add_argument("--variants", default="", help="committed TileLang variants too, e.g. fa3,tuned")
    args = parser.parse_args()
    choice = {"designs": [d for d in args.designs.split(",") if d],
              "variants": [v for v in args.variants.split(",") if v]}
    check_small(choice)
    for name in args.workloads:
        for dtype in ("float16", "bfloat16"):
            sweep(name, dtype, args.rounds, choice)


if __name__ == "__main__":
    main()
