"""Liger-Kernel builds shared by its kernels (kernels/<op>/liger.py): the interpreter probe and the version.

Liger's kernels are Triton kernels launched by its own Python (`liger_kernel.ops.*`), so on a CPU they run, where
they can, in Triton's interpreter. Some cannot: the interpreter passes scalar arguments as Python floats, and a
kernel that calls `.to()` on one (Liger 0.8's `eps.to(tl.float32)`) fails there. `probe` finds that out by
running the library once on a one-row input when the implementation is built on a CPU, and refuses the row with
the interpreter's own words; on a GPU there is nothing to probe.
"""
from __future__ import annotations

from importlib.metadata import version

from opmatrix.incell.plugins import Unsupported


def probe(device, call) -> None:
    """On a CPU, `call()` (the library on a tiny input); Unsupported if Triton's interpreter cannot run it."""
    if device.is_gpu:
        return
    from triton.runtime.errors import InterpreterError

    try:
        call()
    except InterpreterError as exc:
        raise Unsupported(f"Liger-Kernel {version('liger-kernel')}'s kernel does not run in Triton's interpreter "
                          f"(CPU): {exc}") from None
