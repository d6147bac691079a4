"""What kernel and backend files may import: the plugin contract's types and helpers, in one place.

    from opmatrix.kit import Built, Unsupported, load_spec

- `Built(fn, config={...}, cache="cold")`: what `build` returns.
- `Compiled(status, what, config)`: what `compile_for` returns (the helpers in `opmatrix.kit.aot` make one).
- `Unsupported(reason)`: this device / dtype / workload is not covered; `Unavailable(reason)`: the backend's
  package is not importable here; `require(module)`: import it or raise Unavailable.
- `load_spec(__file__)`: the kernel's own spec.py, for constants its implementations share (rmsnorm's EPS).
- `ITEMSIZE[dtype]` (bytes per element, for a spec's `min_bytes`) and `UNIT_ROUNDOFF[dtype]` (the unit roundoff
  the element-wise check counts in, for a spec's `elementwise_tolerance`).

Submodules, imported where used: `aot` (compile-only builds), `amdgcn` (AMD code objects from HIP source by the
distribution's LLVM, read back for a compiles row), `tune` (TileLang's autotuner, twice), `triton_rules`
(the backend hooks of anything Triton compiles: Triton's adapter and Liger-Kernel's), `cutlass` (nvcc, CUTLASS
headers, cached shared libraries), `inductor_isa` and `inductor_header` (torch.compile's probe of a CPU's vector
ISAs and its precompiled C++ header, kept per host); for issue 31's contestants `cubin` (a cubin's arch and
resources), `nvidia` (the NVIDIA-only refusals), `cutile`, `cute_dsl` (their compile-only builds), `helion` (its
fixed and autotuned variants) and `liger` (its interpreter probe); `scoped_env` (one environment variable set for a
block, as compilers read their switches). Stdlib only at import.
"""
from __future__ import annotations

from pathlib import Path
from types import ModuleType

from opmatrix.incell import plugins
from opmatrix.incell.correctness import UNIT_ROUNDOFF
from opmatrix.incell.plugins import Built, Compiled, Unavailable, Unsupported, require

__all__ = ["Built", "Compiled", "Unavailable", "Unsupported", "require", "load_spec", "ITEMSIZE", "UNIT_ROUNDOFF"]

ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4}  # bytes per element of each dtype a kernel may name


def load_spec(implementation_file: str) -> ModuleType:
    """The spec.py beside an implementation file, loaded through the same loader as the worker's (so the same
    module object, checked once): `spec = load_spec(__file__)`, then `spec.EPS`. A constant every implementation
    of a kernel must agree on is written once, in the spec, instead of once per file."""
    folder = Path(implementation_file).resolve().parent
    return plugins.load_spec(folder.parent, folder.name)
