"""FlashAttention 4's forward (flash_attn.cute.flash_attn_func), called as a library. This spec's q, k, v are
(batch, heads, seq, head_dim); FA4 takes (batch, seq, heads, head_dim), so they go in as transposed views (no copy)
and the (batch, seq, heads, dim) output it allocates is copied into `out` (recorded in the config). fp16 and bf16
only; head dims as FA4 validates them per arch.

Compile-only: the same call under torch's FakeTensorMode, with the worker's environment naming the arch
(backends/flash_attn.py), builds FA4's own kernel for sm_90a / sm_100a on a CPU host; the cubin it keeps is read
back by opmatrix.kit.cubin."""
import os
import re
from pathlib import Path

from opmatrix.kit import Built, Compiled, Unsupported, cubin, load_spec, nvidia

spec = load_spec(__file__)


def _check(dtype):
    if dtype not in ("float16", "bfloat16"):
        raise Unsupported(f"FlashAttention 4 takes float16 and bfloat16 (and fp8) inputs, not {dtype}")


def build(workload, dtype, device, variant):
    from flash_attn.cute import flash_attn_func

    _check(dtype)
    causal, scale = workload["causal"], spec.softmax_scale(workload["head_dim"])

    def attention(q, k, v, out):
        o, _ = flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), softmax_scale=scale,
                               causal=causal)
        out.copy_(o.transpose(1, 2))

    return Built(attention, {"library": "flash_attn.cute.flash_attn_func", "output_copy": True})


def compile_for(workload, dtype, device, variant):
    import torch
    from flash_attn.cute import flash_attn_func
    from torch._subclasses.fake_tensor import FakeTensorMode

    nvidia.require(device, "FlashAttention 4", min_sm=80)
    _check(dtype)
    arch = nvidia.arch_label(device)
    if os.environ.get("CUTE_DSL_ARCH") != arch or "CUTE_DSL_DUMP_DIR" not in os.environ:
        raise RuntimeError(f"the worker's environment does not name {arch} for CuTe DSL (backends/flash_attn.py "
                           "sets it where torch sees no GPU)")
    dump = Path(os.environ["CUTE_DSL_DUMP_DIR"])
    dump.mkdir(parents=True, exist_ok=True)
    shape = (workload["batch"], workload["seq"], workload["heads"], workload["head_dim"])
    with FakeTensorMode(allow_non_fake_inputs=True):
        q, k, v = (torch.empty(shape, dtype=getattr(torch, dtype), device="cuda") for _ in range(3))
        flash_attn_func(q, k, v, softmax_scale=spec.softmax_scale(workload["head_dim"]), causal=workload["causal"])
    binaries = sorted(dump.rglob("*.cubin"), key=lambda p: p.stat().st_mtime)
    if not binaries:
        raise RuntimeError("FlashAttention 4 compiled, but CuTe DSL kept no cubin (CUTE_DSL_KEEP=cubin)")
    kernel = re.search(r"(FlashAttention\w+?)_object", binaries[-1].name)
    kernel = kernel.group(1) if kernel else binaries[-1].stem
    what, facts = cubin.describe(arch, binaries[-1].read_bytes(), f" of FlashAttention 4's {kernel}")
    return Compiled("compiles", what, dict(facts, kernel=kernel))
