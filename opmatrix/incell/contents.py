"""The inputs the judge hands out: fresh contents from seeds no worker can learn, and their fp64 references.

Every set comes from the spec's own `make_inputs(workload, dtype, device, seed)` with a seed drawn from the
operating system's random source in the judge's process (never derived from the matrix's seed, a constant or a
counter), so no contestant can compute the contents, or their answers, before it is handed them. The judge keeps
the pristine contents and computes a reference only for the calls it checks, once per set, after the contestants
that used it have been handed their contents. A spec that fails here (make_inputs or reference raising, a reference
that is not finite or all zero) is the spec's fault: SpecFault names it, and its group's rows say so (env_error),
never a contestant's or a device's. Stdlib only at import.
"""
from __future__ import annotations

import random
import time
from types import ModuleType

from opmatrix.incell import integrity
from opmatrix.incell.contract import PluginError


class SpecFault(PluginError):
    """The kernel's spec failed to make inputs or their reference."""


class Contents:
    """`count` fresh input sets, made by `spec` in the judge's memory, and the references asked for so far."""

    def __init__(self, spec: ModuleType, workload: dict, dtype: str, torch_device: str, count: int,
                 rng: random.Random) -> None:
        self.spec, self.workload = spec, workload
        self.seeds = [rng.getrandbits(62) for _ in range(count)]
        self.inputs = [self._make(dtype, torch_device, seed) for seed in self.seeds]
        self.references: dict[int, object] = {}
        self.reference_s = 0.0  # the judge's time spent on references so far

    def _make(self, dtype: str, torch_device: str, seed: int) -> tuple:
        try:
            made = self.spec.make_inputs(dict(self.workload), dtype, torch_device, seed)
        except Exception as exc:
            raise SpecFault(f"{self.spec.__file__}: make_inputs(workload, {dtype!r}, {torch_device!r}, seed) "
                            f"raised {type(exc).__name__}: {exc}") from None
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
            try:
                integrity.require_informative(ref, self.spec.__file__)
            except PluginError as exc:
                raise SpecFault(str(exc)) from None
            self.references[index] = ref
            self.reference_s += time.perf_counter() - started
        return self.references[index]
