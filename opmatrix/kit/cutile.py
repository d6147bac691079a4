"""cuTile compile-only builds: `cuda.tile.compilation.export_kernel` turns a `@ct.kernel` and one signature into a
cubin for a named GPU (tileiras from the `nvidia-cuda-tileiras` package does the work; no GPU, no driver), read
back by opmatrix.kit.cubin for the row's arch, registers and size.

`array(dtype, ndim)` is the signature of a row-major torch tensor as `ct.launch` would see it (int32 indices, the
last stride 1, no aliasing); constants are plain Python values, in the kernel's parameter order.
"""
from __future__ import annotations

import io

from opmatrix.incell.plugins import Compiled
from opmatrix.kit import aot, cubin, nvidia

TILE_DTYPES = ("float16", "bfloat16", "float32")


def array(dtype: str, ndim: int):
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint

    return ArrayConstraint(getattr(ct, dtype), ndim, index_dtype=ct.int32, stride_lower_bound_incl=0,
                           alias_groups=(), may_alias_internally=False,
                           stride_constant=(None,) * (ndim - 1) + (1,))


def gpu_code(device) -> str:
    """tileiras' name for the device: sm_90, sm_100 (it targets the arch-specific features itself)."""
    return f"sm_{aot.cuda_capability(device.arch)}"


def export(kernel, parameters: list, device, name: str, config: dict) -> Compiled:
    """A cubin of `kernel` for `device`, built here and never run; Unsupported for a device cuTile does not target."""
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    nvidia.require(device, "cuTile", min_sm=80)
    signature = KernelSignature(parameters, CallingConvention.cutile_python_v1()).with_mangled_symbol(name)
    out = io.BytesIO()
    export_kernel(kernel, [signature], out, gpu_code=gpu_code(device), output_format="cubin")
    what, facts = cubin.describe(gpu_code(device), out.getvalue(), " by tileiras")
    return Compiled("compiles", what, dict(config, **facts))
