"""Kernel groups: which kernel opmatrix has (or would add) each profiled op belongs to.

The groups are the kernels of kernels/ (gemm_relu, flash_attention, rmsnorm), the two a Llama step would add
(rope, swiglu), and two that are no single kernel (elementwise, other).

One measured piece of time (an op's self CPU time on the CPU, a kernel's device time on a GPU) goes to a group by
the first rule that applies:
1. labelled range: the innermost `opmatrix::<group>` range around the op wins. While profiling, `labelled_ranges()`
   opens such a range around every module whose class name ends with a suffix of MODULE_GROUPS (LlamaRMSNorm ->
   rmsnorm, LlamaRotaryEmbedding -> rope, LlamaMLP -> swiglu, Linear -> gemm_relu) and around every call of a
   function of FUNCTION_GROUPS (transformers' apply_rotary_pos_emb -> rope); both come from the model registry
   (opmatrix.sites.registry), the sites `opmatrix validate` swaps kernels into. Innermost wins, so the projections
   inside LlamaMLP (Linear) are gemm_relu and only its silu and product are swiglu;
2. op name: the outermost op around it (itself included) that OP_GROUPS files under a kernel group: the aten::mm
   under aten::linear is gemm_relu, the aten::empty under aten::scaled_dot_product_attention is flash_attention,
   a softmax (eager attention) is flash_attention;
3. its own name in OP_GROUPS (the elementwise ops);
4. on a GPU, a kernel whose op is still `other` (a custom op, a kernel launched by no op): the first substring of
   KERNEL_PATTERNS in the kernel's name (flash/fmha -> flash_attention, gemm/nvjet/cutlass -> gemm_relu);
5. else other.
These tables (and the registry's sites) are the one place the mapping lives.
"""
from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator

from opmatrix.sites import registry

GEMM, ATTENTION, RMSNORM, ROPE, SWIGLU = "gemm_relu", "flash_attention", "rmsnorm", "rope", "swiglu"
ELEMENTWISE, OTHER = "elementwise", "other"

GROUPS = {  # group -> what it holds, in report order
    GEMM: "matmul + epilogue (linear, mm, addmm, bmm; cuBLAS / CUTLASS kernels)",
    ATTENTION: "attention (scaled_dot_product_attention, flash / efficient / cuDNN kernels, eager softmax)",
    RMSNORM: "RMSNorm (the pow / mean / rsqrt / mul chain of an RMSNorm module, or aten::rms_norm)",
    ROPE: "rotary embedding (cos / sin tables, rotate-half: slice, neg, cat, mul, add)",
    SWIGLU: "SwiGLU activation (silu(gate) * up, inside the MLP)",
    ELEMENTWISE: "elementwise and copies outside the groups above (fusion candidates, not one kernel)",
    OTHER: "everything else (embedding, views, allocation, runtime calls)",
}
KERNEL_GROUPS = (GEMM, ATTENTION, RMSNORM, ROPE, SWIGLU)  # a custom kernel could replace the whole group

RANGE_PREFIX = "opmatrix::"
STEP_RANGE = RANGE_PREFIX + "step"  # one profiled step; names no group

# The model sites (module classes by name suffix, functions) are the registry's: one table for profile and validate
# (opmatrix.sites.registry.SITES), read here as the profile's two views of it.
MODULE_GROUPS = registry.module_sites()  # (class-name suffix, group): a range around every module whose name ends so
FUNCTION_GROUPS = registry.function_sites()  # (module, function, group): a range around each call, where imported

OP_GROUPS = {
    **dict.fromkeys(("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::matmul",
                     "aten::linear", "aten::_scaled_mm", "aten::mv", "aten::addmv"), GEMM),
    **dict.fromkeys(("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
                     "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
                     "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_flash_attention_forward",
                     "aten::_efficient_attention_forward", "aten::softmax", "aten::_softmax",
                     "aten::_safe_softmax"), ATTENTION),
    **dict.fromkeys(("aten::rms_norm", "aten::_fused_rms_norm"), RMSNORM),
    **dict.fromkeys(("aten::add", "aten::add_", "aten::sub", "aten::mul", "aten::mul_", "aten::div", "aten::div_",
                     "aten::neg", "aten::pow", "aten::rsqrt", "aten::sqrt", "aten::exp", "aten::cos", "aten::sin",
                     "aten::silu", "aten::silu_", "aten::gelu", "aten::relu", "aten::relu_", "aten::sigmoid",
                     "aten::tanh", "aten::mean", "aten::sum", "aten::copy_", "aten::_to_copy", "aten::to",
                     "aten::clone", "aten::contiguous", "aten::cat", "aten::where", "aten::masked_fill",
                     "aten::masked_fill_", "aten::fill_", "aten::zero_"), ELEMENTWISE),
}

KERNEL_PATTERNS = (  # (substring of a device kernel's name, lower case, group); attention before gemm: fmha_cutlass
    ("flash", ATTENTION), ("fmha", ATTENTION), ("attention", ATTENTION), ("softmax", ATTENTION),
    ("gemm", GEMM), ("nvjet", GEMM), ("cublas", GEMM), ("cutlass", GEMM), ("xmma", GEMM),
    ("rms_norm", RMSNORM), ("rmsnorm", RMSNORM), ("rotary", ROPE),
    ("elementwise", ELEMENTWISE), ("reduce_kernel", ELEMENTWISE), ("catarray", ELEMENTWISE),
)


def range_name(group: str) -> str:
    """The profiler range that files the ops inside it under `group`."""
    return RANGE_PREFIX + group


def range_group(name: str) -> str | None:
    """The group a range names (`opmatrix::rmsnorm` -> rmsnorm); None for any other event."""
    group = name[len(RANGE_PREFIX):] if name.startswith(RANGE_PREFIX) else None
    return group if group in GROUPS else None


def module_group(module) -> str | None:
    """The group of a module, by the suffix of its class name (MODULE_GROUPS); None: no range for it."""
    name = type(module).__name__
    return next((group for suffix, group in MODULE_GROUPS if name.endswith(suffix)), None)


def kernel_pattern_group(kernel: str) -> str | None:
    """The group a device kernel's name says (KERNEL_PATTERNS); None when it says none."""
    lowered = kernel.lower()
    return next((group for pattern, group in KERNEL_PATTERNS if pattern in lowered), None)


def _lineage(event) -> Iterator:
    """The event, its parent, its parent's parent... up to the outermost CPU event."""
    while event is not None:
        yield event
        event = event.cpu_parent


def classify(event) -> str:
    """The group of a CPU event of torch.profiler (a FunctionEvent): rules 1 to 3 and 5 of the module docstring."""
    lineage = list(_lineage(event))
    labelled = next((g for g in (range_group(e.name) for e in lineage) if g), None)
    if labelled:
        return labelled
    kernel_ops = [OP_GROUPS[e.name] for e in lineage if OP_GROUPS.get(e.name) in KERNEL_GROUPS]
    if kernel_ops:
        return kernel_ops[-1]
    return OP_GROUPS.get(event.name, OTHER)


def classify_kernel(kernel: str, launcher) -> str:
    """The group of a device kernel launched under the CPU event `launcher` (None: no op known): rule 4 where the
    op leaves it `other`."""
    group = classify(launcher) if launcher is not None else OTHER
    return group if group != OTHER else (kernel_pattern_group(kernel) or OTHER)


class _RangeHooks:
    """Global module hooks that open a labelled range before a listed module's forward and close it after."""

    def __init__(self):
        from torch.autograd.profiler import record_function

        self.record_function = record_function
        self.open: list[tuple[int, object]] = []  # (id of the module, its record_function), innermost last

    def before(self, module, args):
        group = module_group(module)
        if group:
            rf = self.record_function(range_name(group))
            rf.__enter__()
            self.open.append((id(module), rf))

    def after(self, module, args, output):
        if self.open and self.open[-1][0] == id(module):
            self.open.pop()[1].__exit__(None, None, None)

    def close_all(self) -> None:
        """Ranges a failed forward left open."""
        while self.open:
            self.open.pop()[1].__exit__(None, None, None)


def _labelled(function, group: str):
    """`function`, each call inside the range of `group`."""
    import functools

    import torch

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with torch.autograd.profiler.record_function(range_name(group)):
            return function(*args, **kwargs)

    wrapper.__opmatrix_labelled__ = function
    return wrapper


@contextlib.contextmanager
def _labelled_functions() -> Iterator[None]:
    """Wrap the FUNCTION_GROUPS functions of already imported modules; put the originals back after."""
    replaced = []
    for module_name, attr, group in FUNCTION_GROUPS:
        module = sys.modules.get(module_name)
        original = getattr(module, attr, None) if module else None
        if original is None or hasattr(original, "__opmatrix_labelled__"):
            continue
        setattr(module, attr, _labelled(original, group))
        replaced.append((module, attr, original))
    try:
        yield
    finally:
        for module, attr, original in replaced:
            setattr(module, attr, original)


@contextlib.contextmanager
def labelled_ranges() -> Iterator[None]:
    """While open, the modules of MODULE_GROUPS and the functions of FUNCTION_GROUPS run inside
    `opmatrix::<group>` ranges, which torch.profiler records and `classify` reads (rule 1)."""
    torch_modules = importlib.import_module("torch.nn.modules.module")
    hooks = _RangeHooks()
    handles = [torch_modules.register_module_forward_pre_hook(hooks.before),
               torch_modules.register_module_forward_hook(hooks.after)]
    try:
        with _labelled_functions():
            yield
    finally:
        for handle in handles:
            handle.remove()
        hooks.close_all()
