"""Helion: rows in tiles, each row whole (one reduction over hidden), fp32 sums, written as PyTorch over tiles.
`default`: one row per program, Helion's code for it as generated; `tuned`: Helion's autotuner picks the block
sizes, warps and reduction loops (opmatrix.kit.helion). On a CPU interpret mode runs the same kernel (correctness
only). Helion takes no closures, so the kernel body is a module function whose `hl` and `torch` are bound when the
kernels are first made (this file loads where Helion is not installed)."""
import functools

from opmatrix.kit import Built, helion as kit, load_spec

spec = load_spec(__file__)
VARIANTS = ("default", "tuned")  # tuned: Helion's autotuner (opmatrix.kit.helion)
hl = torch = None  # helion.language and torch, bound by _kernels()


def _rmsnorm(x, w, out, eps: float):
    m, _ = x.size()
    for rows in hl.tile(m):
        row = x[rows, :].to(torch.float32)
        scale = torch.rsqrt(torch.mean(row * row, dim=-1, keepdim=True) + eps)
        out[rows, :] = (row * scale * w[None, :].to(torch.float32)).to(out.dtype)


@functools.cache
def _kernels():
    """(fixed, tunable): the kernel at one row per program, 8 warps, and the one Helion's autotuner configures."""
    global hl, torch
    import helion
    import helion.language as hl
    import torch

    return (helion.kernel(config=helion.Config(block_sizes=[1], num_warps=8), static_shapes=True)(_rmsnorm),
            helion.kernel(static_shapes=True, autotune_effort=kit.EFFORT)(_rmsnorm))


def build(workload, dtype, device, variant):
    def example():
        x, weight = spec.make_inputs(workload, dtype, device.torch, 0)
        return x, weight, spec.make_output(workload, dtype, device.torch), spec.EPS

    kernel, config = kit.choose(*_kernels(), variant, device, example)

    def rmsnorm(x, weight, out):
        kernel(x, weight, out, spec.EPS)

    return Built(rmsnorm, config)
