"""One call each of TileLang's `fa3` flash attention and cuDNN's SDPA, for Nsight Compute to profile: run under
`ncu --profile-from-start off`, which sees only the calls between the profiler's start and stop (the builds, JIT
compiles and warm-up calls stay out).

    ncu --profile-from-start off --section SpeedOfLight --section Occupancy --section LaunchStats \\
        --section ComputeWorkloadAnalysis python3 tools/h200_flash_ncu.py [WORKLOAD ...] [--dtype float16]

ncu locks the SM clock to its base frequency by default (--clock-control base), so the two kernels' durations
are compared without the driver's power cap moving the clock between them. Issue "Fair verdicts need strong
contestants": why TileLang is 1-4 % behind cuDNN at batch 8 (reports/20261201-h200-flash-fa3-b/NOTES.md)."""
import argparse
import sys

import torch

sys.path.insert(0, ".")
from opmatrix import paths  # noqa: E402 - the project root is on the path above
from opmatrix.core.jobs import DeviceInfo  # noqa: E402
from opmatrix.incell import plugins  # noqa: E402

H200 = DeviceInfo("h200", "nvidia", "sm_90", "H200")
SPEC = plugins.load_spec(paths.KERNELS, "flash_attention")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="*", default=["b8_h32_s4096_d128", "b8_h32_s4096_d128_causal"])
    parser.add_argument("--dtype", default="float16")
    args = parser.parse_args()
    tl = plugins.load_impl(paths.KERNELS, "flash_attention", "tilelang")
    sdpa = plugins.load_impl(paths.KERNELS, "flash_attention", "torch")
    for name in args.workloads:
        workload = SPEC.WORKLOADS[name]
        inputs = SPEC.make_inputs(workload, args.dtype, "cuda", seed=0)
        out = torch.empty_like(inputs[0])
        calls = {"tilelang[fa3]": tl.build(workload, args.dtype, H200, "fa3").fn,
                 "torch[cudnn]": sdpa.build(workload, args.dtype, H200, "cudnn").fn}
        for fn in calls.values():
            for _ in range(3):
                fn(*inputs, out)
        torch.cuda.synchronize()
        for label, fn in calls.items():
            print(f"profiling {name} {args.dtype} {label}", flush=True)
            torch.cuda.profiler.start()
            fn(*inputs, out)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()
