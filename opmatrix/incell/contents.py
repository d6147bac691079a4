"""The inputs the judge hands out: fresh contents from seeds no worker can learn, and their fp64 references.

Every set comes from the spec's own `make_inputs(workload, dtype, device, seed)` with a seed drawn from the
operating system's random source in the judge's process (never derived from the matrix's seed, a constant or a
counter), so no contestant can compute the contents, or their answers, before it is handed them. Each set is of one
of the spec's input kinds (`INPUT_KINDS`, default "normal"; `input_kinds`): the judge chooses which for every set
and tells make_inputs in the workload it hands it (`workload["inputs"]`), never the worker. The judge keeps the
pristine contents and computes a reference only for the calls it checks, once per set, after the contestants that
used it have been handed their contents. A spec that fails here (make_inputs or reference raising, a reference that
is all zero, or not finite where its kind holds no special values, or beyond the output dtype's range) is the spec's
fault: SpecFault names it, and its group's rows say so (env_error), never a contestant's or a device's. Stdlib only
at import.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from types import ModuleType

from opmatrix.incell import integrity
from opmatrix.incell.contract import PluginError

KIND_KEY = "inputs"  # the workload key that tells make_inputs which kind of inputs to make (reserved)
DEFAULT_KIND = "normal"  # the kind of a spec that declares no INPUT_KINDS, and of a make_inputs call without the key


class SpecFault(PluginError):
    """The kernel's spec failed to make inputs or their reference."""


@dataclass(frozen=True)
class InputKinds:
    """The kinds of inputs a spec makes (`names`, in its order), and those of them that hold inf or NaN (`nonfinite`):
    their reference may be non-finite, and an output must match it there (opmatrix.incell.correctness)."""

    names: tuple[str, ...] = (DEFAULT_KIND,)
    nonfinite: frozenset[str] = frozenset()


def input_kinds(spec: ModuleType) -> InputKinds:
    """The spec's INPUT_KINDS and NONFINITE_KINDS, checked: PluginError naming the spec and the fix."""
    where = getattr(spec, "__file__", "the spec")
    names = getattr(spec, "INPUT_KINDS", (DEFAULT_KIND,))
    nonfinite = getattr(spec, "NONFINITE_KINDS", ())
    for constant, value in (("INPUT_KINDS", names), ("NONFINITE_KINDS", nonfinite)):
        if not (isinstance(value, tuple) and all(isinstance(n, str) and n for n in value)
                and len(set(value)) == len(value)) or (constant == "INPUT_KINDS" and not value):
            raise PluginError(f"{where}: {constant} must be a tuple of distinct kind names"
                              + (" (at least one)" if constant == "INPUT_KINDS" else "") + f", got {value!r}")
    stray = [n for n in nonfinite if n not in names]
    if stray:
        raise PluginError(f"{where}: NONFINITE_KINDS names {', '.join(map(repr, stray))}, which INPUT_KINDS "
                          f"({', '.join(names)}) does not declare")
    workloads = getattr(spec, "WORKLOADS", {})
    taken = [name for name, w in (workloads.items() if isinstance(workloads, dict) else ())
             if isinstance(w, dict) and KIND_KEY in w]
    if taken:
        raise PluginError(f"{where}: workload {taken[0]!r} has a parameter {KIND_KEY!r}, the key through which "
                          "the judge tells make_inputs which of INPUT_KINDS to make; name the parameter otherwise")
    return InputKinds(names, frozenset(nonfinite))


class Contents:
    """Fresh input sets, one of each kind in `kinds` (names of the spec's INPUT_KINDS), made by `spec` in the
    judge's memory, and the references asked for so far. `largest`: the largest finite value of the output's dtype
    (a reference beyond it cannot be written by a correct kernel)."""

    def __init__(self, spec: ModuleType, workload: dict, dtype: str, torch_device: str, kinds: list[str],
                 rng: random.Random, nonfinite: frozenset[str] = frozenset(), largest: float | None = None) -> None:
        self.spec, self.workload = spec, workload
        self.nonfinite, self.largest = nonfinite, largest
        self.kinds = list(kinds)
        self.seeds = [rng.getrandbits(62) for _ in self.kinds]
        self.inputs = [self._make(dtype, torch_device, seed, kind) for seed, kind in zip(self.seeds, self.kinds)]
        self.references: dict[int, object] = {}
        self.finite: dict[int, bool] = {}  # set -> its reference is finite everywhere (known once it is computed)
        self.reference_s = 0.0  # the judge's time spent on references so far

    def _make(self, dtype: str, torch_device: str, seed: int, kind: str) -> tuple:
        try:
            made = self.spec.make_inputs({**self.workload, KIND_KEY: kind}, dtype, torch_device, seed)
        except Exception as exc:
            raise SpecFault(f"{self.spec.__file__}: make_inputs(workload with {KIND_KEY}={kind!r}, {dtype!r}, "
                            f"{torch_device!r}, seed) raised {type(exc).__name__}: {exc}") from None
        if not isinstance(made, tuple):
            raise SpecFault(f"{self.spec.__file__}: make_inputs returned {type(made).__name__}; it returns a tuple "
                            "of the kernel's inputs")
        return made

    def __len__(self) -> int:
        return len(self.inputs)

    def reference(self, index: int):
        """The reference of set `index`, computed once (float32 where the inputs are at most 32-bit)."""
        if index not in self.references:
            started = time.perf_counter()
            try:
                ref = integrity.reference_of(lambda kept: self.spec.reference(kept, dict(self.workload)),
                                             self.inputs[index])
            except Exception as exc:
                raise SpecFault(f"{self.spec.__file__}: reference(inputs, workload) raised "
                                f"{type(exc).__name__}: {exc}") from None
            kind = self.kinds[index]
            try:
                finite = integrity.require_informative(ref, self.spec.__file__, kind, kind in self.nonfinite,
                                                       self.largest)
            except PluginError as exc:
                raise SpecFault(str(exc)) from None
            self.references[index], self.finite[index] = ref, finite
            self.reference_s += time.perf_counter() - started
        return self.references[index]
