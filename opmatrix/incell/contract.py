"""The three plugin contracts, declared once, and the check every plugin file passes when it is loaded.

Like pluggy's `_verify_hook`: a kernel or backend file whose hook has the wrong signature, or which declares a
module constant the contract does not know (a typo such as `RETURN_OUTPUT` would otherwise be silently ignored),
is refused at load with the file, the hook or constant, and the fix. Hooks are called positionally, so a hook's
parameters may be named as the file likes (`w` for `workload`); their number is what is checked.
Stdlib only: this runs inside cell environments.
"""
from __future__ import annotations

import ast
import difflib
import inspect
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Callable


class PluginError(Exception):
    """A kernel or backend file is missing or does not honour its contract."""


@dataclass(frozen=True)
class Hook:
    name: str
    params: tuple[str, ...]
    required: bool = True

    @property
    def signature(self) -> str:
        return f"{self.name}({', '.join(self.params)})"


def _flag(value) -> bool:
    return isinstance(value, bool)


def _names(value) -> bool:
    return isinstance(value, tuple) and bool(value) and all(isinstance(v, str) and v for v in value)


@dataclass(frozen=True)
class Constant:
    name: str
    check: Callable[[object], bool]
    expected: str


@dataclass(frozen=True)
class Contract:
    what: str
    hooks: tuple[Hook, ...]
    constants: tuple[Constant, ...] | None  # None: the file's UPPER_CASE names are free (a spec's shared facts)
    required: tuple[str, ...] = ()  # required module attributes that are not hooks
    # constants opmatrix reads where the file's UPPER_CASE names are otherwise free (constants None): documented in
    # docs/reference/plugins.md, checked where they are read (a spec's DTYPES: opmatrix.catalog; its INPUT_KINDS and
    # NONFINITE_KINDS: opmatrix.incell.contents.input_kinds, by the catalog and by the judge)
    read: tuple[Constant, ...] = ()
    retired: dict[str, str] = field(default_factory=dict)  # old names -> what replaced them

    def hook(self, name: str) -> Hook:
        return next(h for h in self.hooks if h.name == name)


SPEC = Contract("kernel spec", (
    Hook("describe", ("workload",)),
    Hook("flops", ("workload",)),
    Hook("min_bytes", ("workload", "dtype")),
    Hook("tolerance", ("dtype",)),
    Hook("make_inputs", ("workload", "dtype", "device", "seed")),
    Hook("make_output", ("workload", "dtype", "device")),
    Hook("reference", ("inputs", "workload")),
    Hook("elementwise_tolerance", ("dtype",), required=False),
    # a workload a matrix defines by its parameters ([workload.<kernel>.<name>]): ValueError(why) refuses it
    Hook("check_workload", ("workload",), required=False),
), constants=None, required=("WORKLOADS",), read=(
    Constant("DTYPES", _names, "the dtype names the kernel is defined for (a non-empty tuple); a matrix that names "
             "another is refused by `opmatrix plan`. Default: the keys of a `TOLERANCE` dict of dtype -> tolerance "
             "when the spec has one, else float16, bfloat16, float32 and float64"),
    Constant("INPUT_KINDS", _names, "the kinds of inputs make_inputs makes (a tuple of names, e.g. `(\"normal\", "
             "\"outliers\")`): the judge's correctness trials hold every kind and the calls it times each hold a "
             "kind drawn at random, told to make_inputs in `workload[\"inputs\"]` (a reserved parameter name; "
             "absent when another caller makes inputs: read it as `w.get(\"inputs\", \"normal\")`). Default: "
             "`(\"normal\",)`"),
    Constant("NONFINITE_KINDS", _names, "the kinds of INPUT_KINDS whose inputs hold inf or NaN where the operation "
             "defines them: their fp64 reference may be inf or NaN, and an output must then hold NaN where it holds "
             "NaN and an inf of the same sign where it holds inf. Default: none (a non-finite reference is the "
             "spec's fault)"),
))

IMPL = Contract("kernel implementation", (
    Hook("build", ("workload", "dtype", "device", "variant")),
    Hook("compile_for", ("workload", "dtype", "device", "variant"), required=False),
), constants=(
    Constant("VARIANTS", _names, "a non-empty tuple of variant names"),
    Constant("RETURNS_OUTPUT", _flag, "True or False"),
))

BACKEND = Contract("backend adapter", (
    Hook("available", ()),
    Hook("covers", ("device",), required=False),
    Hook("environment", ("device", "cache_dir"), required=False),
    Hook("timed", ("device",), required=False),
), constants=(
    Constant("TIMED", _flag, "True or False"),
    Constant("COMPILES_ON_FIRST_CALL", _flag, "True or False"),
    Constant("BUILDS_VARY", _flag, "True or False"),
), retired={"timer": "TIMED = False (never timed) or def timed(device) -> bool (timed on some devices only)"})

_UPPER = re.compile(r"^[A-Z][A-Z0-9_]*$")


def check(module: ModuleType, path: Path, contract: Contract) -> None:
    """Raise PluginError naming the file, the name and the fix, for the first way `module` breaks `contract`."""
    missing = [name for name in contract.required if not hasattr(module, name)]
    missing += [h.signature for h in contract.hooks if h.required and not hasattr(module, h.name)]
    if missing:
        raise PluginError(f"{path}: a {contract.what} must define {', '.join(missing)}; "
                          f"the contract is {_listing(contract)}")
    for old, new in contract.retired.items():
        if hasattr(module, old):
            raise PluginError(f"{path}: {old}() is no longer part of the {contract.what} contract; use {new}")
    for hook in contract.hooks:
        if hasattr(module, hook.name):
            _check_signature(getattr(module, hook.name), hook, path, contract)
    if contract.constants is not None:
        _check_constants(module, path, contract)
    _check_near_misses(module, path, contract)


def check_source(path: Path, contract: Contract) -> str:
    """'' or why a plugin file breaks `contract`, read without importing it (the planner has no framework): it does
    not parse (with its line), it declares a module constant the contract does not know, or a hook it defines with
    `def` takes another number of parameters. What only an import can show is checked when the file is loaded."""
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, str(path))
    except SyntaxError as exc:
        line = (exc.text or "").strip()
        return (f"{path}:{exc.lineno}: {exc.msg}" + (f" in `{line[:80]}`" if line else "")
                + "; the file does not parse: fix that line")
    except (OSError, UnicodeDecodeError) as exc:
        return f"{path}: cannot be read ({exc})"
    if contract.constants is not None:
        allowed = [c.name for c in contract.constants]
        for name in _assigned_upper(path):
            if name not in allowed:
                close = difflib.get_close_matches(name, allowed, n=1)
                hint = f"did you mean {close[0]}? " if close else ""
                return (f"{path}: unknown module constant {name}; {hint}a {contract.what} declares only "
                        f"{', '.join(allowed)}; a constant of the file's own is private: name it _{name}")
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in {h.name for h in contract.hooks}:
            hook = contract.hook(node.name)
            args = node.args
            positional = len(args.posonlyargs) + len(args.args)
            required = positional - len(args.defaults)
            if not (required <= len(hook.params) and (positional >= len(hook.params) or args.vararg)):
                return (f"{path}:{node.lineno}: {node.name} takes {positional} parameter(s), the {contract.what} "
                        f"contract calls {hook.signature}; define it as `def {hook.signature}:`")
    return ""


def _check_signature(fn, hook: Hook, path: Path, contract: Contract) -> None:
    fix = f"define it as `def {hook.signature}:`"
    if not callable(fn):
        raise PluginError(f"{path}: {hook.name} must be a function {hook.signature}, got {type(fn).__name__}; {fix}")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check
        return
    try:
        signature.bind(*hook.params)
    except TypeError as exc:
        raise PluginError(f"{path}: {hook.name}{signature} does not match the {contract.what} contract "
                          f"{hook.signature} ({exc}); {fix}") from None


def _assigned_upper(path: Path) -> list[str]:
    """The UPPER_CASE names the file assigns at module level (imports are not declarations)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name) and _UPPER.match(leaf.id):
                    names.append(leaf.id)
    return names


def _check_constants(module: ModuleType, path: Path, contract: Contract) -> None:
    allowed = {c.name: c for c in contract.constants}
    for name in _assigned_upper(path):
        if name not in allowed:
            close = difflib.get_close_matches(name, allowed, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise PluginError(f"{path}: unknown module constant {name}; {hint}a {contract.what} declares only "
                              f"{', '.join(allowed)}; a constant of the file's own is private: name it _{name}")
    for constant in contract.constants:
        if hasattr(module, constant.name) and not constant.check(getattr(module, constant.name)):
            raise PluginError(f"{path}: {constant.name} must be {constant.expected}, "
                              f"got {getattr(module, constant.name)!r}")


def _check_near_misses(module: ModuleType, path: Path, contract: Contract) -> None:
    """A public function whose name is one letter off a hook (`compile_fro`) is a hook that would never run."""
    hooks = [h.name for h in contract.hooks]
    for name, value in vars(module).items():
        if name.startswith("_") or name in hooks or not inspect.isfunction(value):
            continue
        if getattr(value, "__module__", None) != module.__name__:
            continue  # imported, not defined here
        close = difflib.get_close_matches(name, hooks, n=1, cutoff=0.85)
        if close:
            raise PluginError(f"{path}: {name}() is not a {contract.what} hook; did you mean "
                              f"{contract.hook(close[0]).signature}?")


def _listing(contract: Contract) -> str:
    hooks = [h.signature + ("" if h.required else " (optional)") for h in contract.hooks]
    return ", ".join([*contract.required, *hooks])
