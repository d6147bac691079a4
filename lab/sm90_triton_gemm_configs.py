"""ptxas' registers and spills of the Triton gemm_relu kernel (kernels/gemm_relu/triton.py) built for an H200
(sm_90a) at several tile configurations, on any host with Triton (no GPU): which configurations the next H200
session should time. Each line is what a compile-only row would say (opmatrix.kit.aot.triton_compile_for).

    python lab/sm90_triton_gemm_configs.py [float16|bfloat16]

Used for reports/20261130-cpu-sm90-builds/NOTES.md (the committed configuration, 128x256x64 with 8 warps, spills)."""
from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

from opmatrix import paths
from opmatrix.kit import aot

sys.path.insert(0, str(Path(__file__).parent))
from h200_sweeps import H200  # noqa: E402 - this file's folder
# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): the committed one first, then smaller tiles, more stages,
# fewer warps and the transposed tile
CONFIGS = ((128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (128, 256, 64, 4, 3), (128, 128, 64, 8, 3),
           (128, 128, 64, 4, 4), (128, 256, 32, 8, 4), (256, 128, 64, 8, 3), (64, 256, 64, 4, 4))


def kernel_module():
    spec = importlib.util.spec_from_file_location("gemm_relu_triton", paths.BUILTIN_KERNELS / "gemm_relu" / "triton.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> int:
    dtype = argv[0] if argv else "float16"
    # a cache of its own: a cubin from Triton's cache comes without ptxas' report
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="sm90-triton-gemm-")
    kernel = kernel_module()._gemm_relu_kernel
    for bm, bn, bk, warps, stages in CONFIGS:
        built = aot.triton_compile_for(kernel, dtype, {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8},
                                       {"num_warps": warps, "num_stages": stages}, H200)
        print(f"{bm}x{bn}x{bk}, {warps} warps, {stages} stages: {built.what}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
