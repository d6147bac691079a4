"""Helion: one program per tile of C, a loop over K of hl.dot into an fp32 accumulator, relu and the cast on the way
out, written as PyTorch over tiles. `default`: 128 x 128 x 64 tiles (32-deep for fp32), 8 warps, 3 stages;
`tuned`: Helion's autotuner picks them (opmatrix.kit.helion). As in kernels/rmsnorm/helion.py, `hl` and `torch` are
bound when the kernels are first made (Helion takes no closures).

On a CPU Helion 1.5's interpret mode runs hl.dot as torch.mm with an fp32 out_dtype (aten::mm.dtype), which torch's
CPU build has no kernel for: the row is unsupported, with that reason, until torch adds one (asked at build time)."""
import functools

from opmatrix.kit import Built, Unsupported, helion as kit, load_spec

spec = load_spec(__file__)
VARIANTS = ("default", "tuned")  # tuned: Helion's autotuner (opmatrix.kit.helion)
hl = torch = None  # helion.language and torch, bound by _kernels()


def _gemm_relu(a, b, out):
    m, k = a.size()
    _, n = b.size()
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            acc = hl.dot(a[tm, tk], b[tk, tn], acc=acc)
        out[tm, tn] = torch.relu(acc).to(out.dtype)


@functools.cache
def _kernels(depth: int):
    """(fixed, tunable): 128 x 128 x `depth` tiles, 8 warps, 3 stages, and the one Helion's autotuner configures."""
    global hl, torch
    import helion
    import helion.language as hl
    import torch

    fixed = helion.Config(block_sizes=[128, 128, depth], num_warps=8, num_stages=3)
    return (helion.kernel(config=fixed, static_shapes=True)(_gemm_relu),
            helion.kernel(static_shapes=True, autotune_effort=kit.EFFORT)(_gemm_relu))


def build(workload, dtype, device, variant):
    import torch

    if not device.is_gpu and not torch._C._dispatch_has_kernel_for_dispatch_key("aten::mm.dtype", "CPU"):
        raise Unsupported(f"Helion's interpret mode runs hl.dot as torch.mm(out_dtype=...) (aten::mm.dtype), which "
                          f"torch {torch.__version__} has no CPU kernel for")

    def example():
        return (*spec.make_inputs(workload, dtype, device.torch, 0), spec.make_output(workload, dtype, device.torch))

    kernel, config = kit.choose(*_kernels(32 if dtype == "float32" else 64), variant, device, example)
    return Built(lambda a, b, out: kernel(a, b, out), config)
