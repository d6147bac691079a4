"""The model registry: which places of a model's code each kernel group covers, and which of them an opmatrix
kernel replaces. One table, read by both commands:

- `opmatrix profile` (opmatrix.profile.ops) opens a labelled range around every module whose class name ends with
  a `module_suffix` of a site, and around every call of a site's module-level `function`, and files the ops inside
  under the site's `group`;
- `opmatrix validate` replaces the `function` of every site that names a `kernel` (a module-level function, or a
  class's method such as `forward`) by its `adapter`, which calls the kernel's chosen implementation, loaded by
  path through the same plugin loader as a matrix run's workers (opmatrix.incell.plugins).

Wiring your own model: add a Site with
- `group`: the profile's kernel group whose time the site is part of (the share the Amdahl prediction uses);
- `function`: "package.module:name" (a function the model calls by its module-global name, as Llama's attention
  calls apply_rotary_pos_emb) or "package.module:Class.method" (a method of a module class, e.g. `forward`);
- `kernel`: the folder under kernels/ whose implementations replace it;
- `adapter`: `adapter(original, kernel) -> replacement`. The replacement takes the arguments `original` takes (self
  first for a method), computes the kernel's inputs (its spec's make_inputs layout), calls `kernel(workload,
  inputs)` (opmatrix.validate.swap.Kernel: builds the implementation once per workload and returns the kernel's
  output tensor), and returns what `original` returns. Where the call cannot be served honestly (another epsilon,
  another activation, a layout the kernel does not take) it raises `adapters.Unfit(reason)`: the swap is reported
  as not fitting, never silently served by the original.
Only replace what the kernel computes: a site whose code does more than the kernel (the cos/sin tables of the rotary
embedding module, the residual add around a norm) keeps that part in the adapter, in the framework's own ops.
Stdlib only at import (the profile's tables are read without torch).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from opmatrix.core.errors import UsageError
from opmatrix.sites import adapters

LLAMA = "transformers.models.llama.modeling_llama"


@dataclass(frozen=True)
class Site:
    group: str  # the kernel group of opmatrix.profile.ops.GROUPS
    module_suffix: str = ""  # profile: a range around every module whose class name ends so
    function: str = ""  # "package.module:name" or "package.module:Class.method"
    kernel: str = ""  # validate: the kernel (folder of kernels/) that replaces `function`
    adapter: Callable | None = None  # validate: adapter(original, kernel) -> replacement
    replaces: str = ""  # what the swap replaces, in words (reports)
    eager: str = ""  # validate: the model's own code as a variant of the kernel ("torch[llama]") when the run's
    #                  baseline computes the op otherwise: the micro speed-up is taken against it, paired by round

    @property
    def module(self) -> str:
        return self.function.partition(":")[0]

    @property
    def attribute(self) -> str:
        """The name after the colon: `apply_rotary_pos_emb`, `LlamaRMSNorm.forward`."""
        return self.function.partition(":")[2]

    @property
    def is_method(self) -> bool:
        return "." in self.attribute


SITES = (
    # profile ranges by class name: LlamaRMSNorm, torch.nn.RMSNorm, MistralRMSNorm, ...
    Site("rmsnorm", module_suffix="RMSNorm"),
    Site("rope", module_suffix="RotaryEmbedding"),
    Site("swiglu", module_suffix="LlamaMLP"),
    Site("swiglu", module_suffix="SwiGLU"),
    Site("gemm_relu", module_suffix="Linear"),  # torch.nn.Linear (its ops are gemm_relu also inside an MLP range)
    # profiled (a range around each call) and swapped
    Site("rope", function=f"{LLAMA}:apply_rotary_pos_emb", kernel="rope", adapter=adapters.rope,
         replaces="apply_rotary_pos_emb (q and k rotated; the cos/sin tables stay the model's)"),
    # swapped; profiled through the class-name ranges above
    Site("rmsnorm", function=f"{LLAMA}:LlamaRMSNorm.forward", kernel="rmsnorm", adapter=adapters.rmsnorm,
         replaces="LlamaRMSNorm.forward (every norm: input, post-attention, final)", eager="torch[llama]"),
    Site("swiglu", function=f"{LLAMA}:LlamaMLP.forward", kernel="swiglu", adapter=adapters.swiglu_mlp,
         replaces="silu(gate_proj(x)) * up_proj(x) inside LlamaMLP.forward (the projections stay the model's)"),
)
# Not wired, and why: add_rmsnorm (the residual add sits in LlamaDecoderLayer.forward's body, between the attention
# and the post-attention norm: replacing it means rewriting that forward, not calling a kernel in place of a
# function); flash_attention (transformers' attention interface passes masks, dropout, GQA and scaling the kernel's
# signature does not take); gemm_relu (Llama has no ReLU after a projection).


def module_sites() -> tuple[tuple[str, str], ...]:
    """(class-name suffix, group): the profile's module ranges."""
    return tuple((s.module_suffix, s.group) for s in SITES if s.module_suffix)


def function_sites() -> tuple[tuple[str, str, str], ...]:
    """(module, function, group): the profile's function ranges (module-level functions only; methods are in their
    module's range)."""
    return tuple((s.module, s.attribute, s.group) for s in SITES if s.function and not s.is_method)


def swap_sites(kernel: str) -> tuple[Site, ...]:
    """The sites a kernel replaces."""
    return tuple(s for s in kernel_sites() if s.kernel == kernel)


def swappable() -> tuple[str, ...]:
    """The kernels some site can take, in table order."""
    return tuple(dict.fromkeys(s.kernel for s in kernel_sites()))


def kernel_sites() -> tuple[Site, ...]:
    """The sites a kernel replaces, every kernel's, in table order."""
    return tuple(s for s in SITES if s.kernel and s.adapter is not None)


def resolve(site: Site):
    """(owner, attribute name) of a site: the module, or the class of a `Class.method` site."""
    try:
        owner = importlib.import_module(site.module)
    except ImportError as exc:
        raise UsageError(f"registry site {site.function}: cannot import {site.module} ({exc})") from None
    *path, name = site.attribute.split(".")
    for part in path:
        owner = getattr(owner, part, None)
        if owner is None:
            raise UsageError(f"registry site {site.function}: {site.module} has no {part}")
    if name not in vars(owner) and not hasattr(owner, name):
        raise UsageError(f"registry site {site.function}: {owner.__name__} has no {name}")
    return owner, name


def install(site: Site, make: Callable) -> tuple:
    """Put make(original) in place of the site's function (validate's swaps, the profile's observers); returns
    what `restore` takes to put the original back."""
    owner, name = resolve(site)
    original = vars(owner)[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(owner, name, make(original))
    return owner, name, original


def restore(installed: tuple) -> None:
    """Undo one `install`."""
    owner, name, original = installed
    setattr(owner, name, original)
