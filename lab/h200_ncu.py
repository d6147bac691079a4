"""One call of each named implementation of a kernel, for Nsight Compute to profile: run under
`ncu --profile-from-start off`, which sees only the calls between the profiler's start and stop (the builds, JIT
compiles and warm-up calls stay out).

    ncu --profile-from-start off --section SpeedOfLight --section Occupancy --section LaunchStats \\
        --section ComputeWorkloadAnalysis python3 lab/h200_ncu.py KERNEL WORKLOAD [WORKLOAD ...] \\
        --impls tilelang:fa3,torch:cudnn [--dtype float16]

An implementation is BACKEND:VARIANT as in a matrix (`torch:default`, `blaslt:default`, `tilelang:ws`). ncu locks
the SM clock to its base frequency by default (--clock-control base), so the kernels' durations are compared
without the driver's power cap moving the clock between them. Issue "Fair verdicts need strong contestants":
reports/20261201-h200-tilelang-flash-sweep/NOTES.md (why TileLang trailed cuDNN at batch 8)."""
import argparse
import sys
from pathlib import Path

import torch

sys.path[:0] = [".", str(Path(__file__).parent)]
from opmatrix import paths  # noqa: E402 - the project root is on the path above
from opmatrix.incell import plugins  # noqa: E402
from h200_sweeps import H200  # noqa: E402 - this file's folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel")
    parser.add_argument("workloads", nargs="+")
    parser.add_argument("--impls", required=True, help="comma-separated BACKEND:VARIANT")
    parser.add_argument("--dtype", default="float16")
    args = parser.parse_args()
    spec = plugins.load_spec(paths.BUILTIN_KERNELS, args.kernel)
    impls = [tuple(item.split(":", 1)) for item in args.impls.split(",")]
    for name in args.workloads:
        workload = spec.WORKLOADS[name]
        inputs = spec.make_inputs(workload, args.dtype, "cuda", seed=0)
        out = spec.make_output(workload, args.dtype, "cuda")
        calls = {f"{backend}[{variant}]": plugins.load_impl(paths.BUILTIN_KERNELS, args.kernel, backend)
                 .build(workload, args.dtype, H200, variant).fn for backend, variant in impls}
        for fn in calls.values():
            for _ in range(3):
                fn(*inputs, out)
        torch.cuda.synchronize()
        for label, fn in calls.items():
            print(f"profiling {args.kernel} {name} {args.dtype} {label}", flush=True)
            torch.cuda.profiler.start()
            fn(*inputs, out)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()
