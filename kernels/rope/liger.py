"""Liger-Kernel's RoPE (liger_kernel.ops.rope.rope_forward) computes a narrower operator than this kernel's spec: it
reads the first half of cos and sin and applies it to both halves of each head (the duplicated cat(freqs, freqs)
tables of Llama, which its _resolve_rotary_dim says it assumes), while kernels/rope/spec.py draws both halves
independently so that no half may stand in for the other. Every row is refused with that reason: a gap, kept
visible, not a failure of the library."""
from opmatrix.kit import Unsupported


def build(workload, dtype, device, variant):
    from importlib.metadata import version

    raise Unsupported(f"Liger-Kernel {version('liger-kernel')}'s RoPE applies the first half of cos/sin to both "
                      "halves (Llama's duplicated tables); this spec's cos/sin differ between the halves")


def compile_for(workload, dtype, device, variant):
    return build(workload, dtype, device, variant)
