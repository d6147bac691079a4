"""Profile targets: the model step `opmatrix profile TARGET` runs.

A target is either
- an entry `module:function`: the function returns a zero-argument callable, the step; it takes the options the
  command line gives (`preset`, `device`) as keyword arguments; or
- a path to a Python script that defines `step()` itself (its device: --device, else a `DEVICE` it defines, else
  cuda where there is one).

Two real targets ship here, both with random weights (nothing is downloaded) and two presets:
- `opmatrix.profile.targets:llama_step`: transformers' LlamaForCausalLM (sdpa attention), one forward pass under
  torch.no_grad();
- `opmatrix.profile.targets:block_step`: plain PyTorch decoder blocks (RMSNorm, attention through
  scaled_dot_product_attention, SwiGLU MLP), no dependency beyond torch.
Presets: `gpu` (hidden 2048, 8 layers, 16 heads, intermediate 5632, sequence 2048, batch 4, bf16, cuda) and `tiny`
(hidden 64, 2 layers, 4 heads, intermediate 172, vocabulary 256, sequence 32, batch 2, float32, cpu).
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from opmatrix.core.errors import UsageError

DEVICES = ("cpu", "cuda")
PROFILE_TARGETS = ("llama_step", "block_step")  # what an error about a missing function of this module lists


@dataclass(frozen=True)
class Preset:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int
    seq: int
    batch: int
    dtype: str
    device: str


PRESETS = {
    "gpu": Preset(hidden=2048, layers=8, heads=16, intermediate=5632, vocab=32000, seq=2048, batch=4,
                  dtype="bfloat16", device="cuda"),
    "tiny": Preset(hidden=64, layers=2, heads=4, intermediate=172, vocab=256, seq=32, batch=2, dtype="float32",
                   device="cpu"),
}


class Step:
    """A zero-argument step, with the device it runs on and a line saying what it is."""

    def __init__(self, run: Callable[[], object], device: str, description: str):
        self.run, self.device, self.description = run, device, description

    def __call__(self):
        return self.run()


@dataclass(frozen=True)
class Target:
    spec: str  # as the user named it
    name: str  # short, for the run id: the function's or the script's name
    make: Callable[..., Callable[[], object]] | None = None  # entry: the function returning the step
    script_step: Callable[[], object] | None = None  # script: its step()
    script_device: str | None = None  # script: its DEVICE, if it names one


def load_target(spec: str) -> Target:
    """The target a user named: a script path (ends with .py or is a file), else `module:function`."""
    path = Path(spec).expanduser()
    if spec.endswith(".py") or path.is_file():
        return _script_target(spec, path)
    return _entry_target(spec)


def _entry_target(spec: str) -> Target:
    module_name, _, function_name = spec.partition(":")
    if not module_name or not function_name:
        raise UsageError(f"target {spec!r}: name a Python entry as module:function (e.g. "
                         "opmatrix.profile.targets:llama_step) or a path to a script that defines step()")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"target {spec}: cannot import module {module_name!r} ({exc}); check the name, or install "
                         "what it needs (transformers for llama_step: pip install opmatrix[model])") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        listed = getattr(module, "PROFILE_TARGETS", None) or _public_functions(module)
        raise UsageError(f"target {spec}: module {module_name} has no function {function_name!r}; its targets: "
                         f"{', '.join(listed) or 'none'}")
    return Target(spec=spec, name=function_name, make=function)


def _public_functions(module) -> list[str]:
    return sorted(n for n, v in vars(module).items() if inspect.isfunction(v) and not n.startswith("_")
                  and v.__module__ == module.__name__)


def _script_target(spec: str, path: Path) -> Target:
    if not path.is_file():
        raise UsageError(f"target {spec}: no such script; name a .py file that defines step(), or an entry "
                         "module:function")
    loader_spec = importlib.util.spec_from_file_location(f"opmatrix_profile_target_{path.stem}", path)
    module = importlib.util.module_from_spec(loader_spec)
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:  # the user's script: any error it raises while loading
        raise UsageError(f"target {spec}: the script failed while loading: {type(exc).__name__}: {exc}") from None
    step = getattr(module, "step", None)
    if not callable(step):
        raise UsageError(f"target {spec}: the script defines no step() function; define `def step():` running one "
                         "model step (it is called with no arguments)")
    return Target(spec=spec, name=path.stem, script_step=step, script_device=getattr(module, "DEVICE", None))


def make_step(target: Target, preset: str | None = None, device: str | None = None) -> Callable[[], object]:
    """The target's step, built for the options given (None: the target's default). Raises UsageError for an option
    the target does not take, or a device this host does not have."""
    if device is not None:
        check_device(device, target.spec)
    if target.script_step is not None:
        if preset is not None:
            raise UsageError(f"target {target.spec}: a script defines its own step(); --preset applies to "
                             "module:function targets")
        return target.script_step
    options = {k: v for k, v in (("preset", preset), ("device", device)) if v is not None}
    try:
        inspect.signature(target.make).bind(**options)
    except TypeError as exc:
        given = ", ".join(f"{k}={v!r}" for k, v in options.items()) or "no arguments"
        raise UsageError(f"target {target.spec} cannot be called with {given} ({exc}): a target function takes "
                         "only the keyword arguments its options give (preset, device), each optional") from None
    step = target.make(**options)
    if not callable(step):
        raise UsageError(f"target {target.spec} returned {type(step).__name__}, not a step: the function must return "
                         "a callable that runs one model step with no arguments")
    return step


def step_device(target: Target, step, device: str | None) -> str:
    """The device the step runs on: --device, else what the step or the script says, else cuda where there is
    one."""
    chosen = device or getattr(step, "device", None) or target.script_device
    if chosen is None:
        import torch

        chosen = "cuda" if torch.cuda.is_available() else "cpu"
    check_device(chosen, target.spec)
    return chosen


def check_device(device: str, spec: str) -> None:
    """UsageError unless the device is one this host has."""
    kind, _, index = device.partition(":")
    if kind not in DEVICES or (index and not index.isdigit()):
        raise UsageError(f"target {spec}: device {device!r} is not one of {', '.join(DEVICES)} (cuda:N for one GPU)")
    if kind == "cuda":
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (index and int(index) >= count):
            raise UsageError(f"target {spec}: device {device} is not on this host ({count} CUDA device(s) visible "
                             "to torch); use --device cpu (and --preset tiny for a small model)")


def _preset(name: str, device: str | None, target: str) -> Preset:
    if name not in PRESETS:
        raise UsageError(f"target {target}: unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    chosen = replace(PRESETS[name], device=device) if device else PRESETS[name]
    check_device(chosen.device, f"{target} (preset {name})")
    return chosen


def llama_step(preset: str = "gpu", device: str | None = None) -> Step:
    """One forward pass of a Llama-style decoder (transformers' LlamaForCausalLM, random weights, sdpa attention)
    over a random batch of token ids, under torch.no_grad()."""
    import torch

    p = _preset(preset, device, f"{__name__}:llama_step")
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        raise UsageError(f"target {__name__}:llama_step needs transformers: pip install opmatrix[model] (or pip "
                         "install transformers); block_step needs torch only") from None
    config = LlamaConfig(hidden_size=p.hidden, num_hidden_layers=p.layers, num_attention_heads=p.heads,
                         num_key_value_heads=p.heads, intermediate_size=p.intermediate, vocab_size=p.vocab,
                         max_position_embeddings=max(p.seq, 64), attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device(p.device):
        model = LlamaForCausalLM(config)
    model = model.to(dtype=getattr(torch, p.dtype)).eval()
    ids = torch.randint(0, p.vocab, (p.batch, p.seq), device=p.device,
                        generator=torch.Generator(p.device).manual_seed(1))

    def run():
        with torch.no_grad():
            return model(input_ids=ids, use_cache=False).logits

    return Step(run, p.device, f"LlamaForCausalLM forward ({preset}: {_describe(p)}, attention "
                f"{model.config._attn_implementation})")


def block_step(preset: str = "gpu", device: str | None = None) -> Step:
    """One forward pass of plain PyTorch decoder blocks (RMSNorm, causal scaled_dot_product_attention, SwiGLU MLP)
    over random activations, under torch.no_grad()."""
    import torch

    p = _preset(preset, device, f"{__name__}:block_step")
    torch.manual_seed(0)
    with torch.device(p.device):
        model = torch.nn.Sequential(*(_block_class()(p) for _ in range(p.layers)))
        x = torch.randn(p.batch, p.seq, p.hidden)
    model = model.to(dtype=getattr(torch, p.dtype)).eval()
    x = x.to(getattr(torch, p.dtype))

    def run():
        with torch.no_grad():
            return model(x)

    return Step(run, p.device, f"plain PyTorch decoder blocks ({preset}: {_describe(p)})")


def _describe(p: Preset) -> str:
    return (f"hidden {p.hidden}, {p.layers} layers, {p.heads} heads, intermediate {p.intermediate}, sequence "
            f"{p.seq}, batch {p.batch}, {p.dtype}, {p.device}")


@functools.cache
def _block_class():
    """The decoder block's class, made on first use so that importing this module does not import torch."""
    import torch.nn.functional as F
    from torch import nn

    class SelfAttention(nn.Module):
        def __init__(self, p: Preset):
            super().__init__()
            self.heads, self.head_dim = p.heads, p.hidden // p.heads
            self.qkv = nn.Linear(p.hidden, 3 * p.hidden, bias=False)
            self.out = nn.Linear(p.hidden, p.hidden, bias=False)

        def forward(self, x):
            b, s, h = x.shape
            q, k, v = self.qkv(x).view(b, s, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.out(y.transpose(1, 2).reshape(b, s, h))

    class SwiGLU(nn.Module):
        def __init__(self, p: Preset):
            super().__init__()
            self.gate = nn.Linear(p.hidden, p.intermediate, bias=False)
            self.up = nn.Linear(p.hidden, p.intermediate, bias=False)
            self.down = nn.Linear(p.intermediate, p.hidden, bias=False)

        def forward(self, x):
            return self.down(F.silu(self.gate(x)) * self.up(x))

    class Block(nn.Module):
        """Pre-norm: x + attention(RMSNorm(x)), then x + SwiGLU(RMSNorm(x))."""

        def __init__(self, p: Preset):
            super().__init__()
            self.attn_norm, self.attn = nn.RMSNorm(p.hidden, eps=1e-6), SelfAttention(p)
            self.mlp_norm, self.mlp = nn.RMSNorm(p.hidden, eps=1e-6), SwiGLU(p)

        def forward(self, x):
            x = x + self.attn(self.attn_norm(x))
            return x + self.mlp(self.mlp_norm(x))

    return Block
