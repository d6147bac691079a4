"""The GPU faults: implementations rendered by tests/faults/plugins.py (the one place a build is written) next to
the static matrix (gpu-faults.toml) and kernel spec (kernels/gpufault/spec.py) of this folder.

    python -m tests.faults.gpu.faults DIR     # writes DIR/{gpu-faults.toml,kernels,backends}; then
    opmatrix run DIR/gpu-faults.toml --no-ray
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

from tests.faults import plugins

HERE = Path(__file__).resolve().parent

TRITON_OOB = '''
import triton
import triton.language as tl

_FAR = 1 << 36  # elements past the end of the output: 256 GiB away, never mapped


@triton.jit
def _store_far(x_ptr, y_ptr, n, offset, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    tl.store(y_ptr + offset + i, tl.load(x_ptr + i, mask=mask) * 2, mask=mask)
'''

IMPLS = {
    "torch": plugins.impl("out.copy_(x * 2)"),
    "good": plugins.impl("out.copy_(x * 2)"),
    # CUDA illegal memory access: a Triton kernel storing far out of bounds (sticky: the context is lost)
    "oob": plugins.impl("_store_far[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), _FAR, BLOCK=1024)",
                        prelude=TRITON_OOB),
    # device out of memory: a workspace of twice the device's memory, asked for at call time
    "oom": plugins.impl("workspace = torch.empty(2 * torch.cuda.get_device_properties(x.device).total_memory, "
                        "dtype=torch.uint8, device=x.device)\nout.copy_(x * 2)", prelude="import torch"),
}
ADAPTERS = {
    "torch": plugins.adapter("events"),
    "good": plugins.adapter("events"),
    "oob": plugins.adapter("events", prelude="COMPILES_ON_FIRST_CALL = True  # as backends/triton.py"),
    "oom": plugins.adapter("events"),
}


def write(root: Path) -> Path:
    """root/{gpu-faults.toml, kernels/gpufault/*, backends/*}; returns the matrix file."""
    plugins.write_tree(root, {"gpufault": ((HERE / "kernels" / "gpufault" / "spec.py").read_text(), IMPLS)},
                       ADAPTERS)
    shutil.copy(HERE / "gpu-faults.toml", root / "gpu-faults.toml")
    return root / "gpu-faults.toml"


if __name__ == "__main__":
    print(write(Path(sys.argv[1])))
