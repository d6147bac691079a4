"""The workloads a model step calls each kernel with, written as a workloads file a matrix includes
(`workloads_from`, opmatrix.matrix_workloads), so that a comparison runs on the model's own shapes.

The model registry's sites that a kernel replaces (opmatrix.sites.registry, the ones `opmatrix validate` swaps)
already say how a call of the model becomes the kernel's workload: their adapter computes it from the model's
tensors to call the kernel. `observe` runs one step with each such site observed: the adapter is handed a stand-in
kernel that records the workload and the dtype it is called with and stops the adapter, and then the model's own
function computes the call's result, so the observed step computes what the unmodified one does. A call the adapter
refuses (`Unfit`: another epsilon, another activation) is noted with its reason, never recorded as a workload.
Only sites whose module the step has imported are observed (as the profile's labelled ranges): a model that does
not use transformers' Llama records no Llama site.

`fragment` writes the TOML: `[workload.<kernel>.<name>]` per distinct workload, its parameters as the kernel's
spec takes them; the name is the target's (llama_step_tiny), numbered where a kernel saw several shapes.
"""
from __future__ import annotations

import functools
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field

from opmatrix.incell import plugins
from opmatrix.sites import adapters, registry

FILE = "workloads.toml"


class _Seen(Exception):
    """Raised by the stand-in kernel: the adapter got as far as calling the kernel, with these arguments."""

    def __init__(self, workload: dict, dtype: str):
        super().__init__(workload)
        self.workload, self.dtype = workload, dtype


class StandIn:
    """The `kernel` an adapter is handed while observing: the spec it may read (rmsnorm's EPS), and a call that
    records what the kernel would be called with."""

    def __init__(self, spec):
        self.spec = spec

    def __call__(self, workload: dict, inputs: tuple):
        raise _Seen(dict(workload), str(inputs[0].dtype).removeprefix("torch."))


@dataclass
class Seen:
    """One distinct workload of a kernel: how often the observed step called it, in which dtypes, from where."""
    kernel: str
    params: dict
    calls: int = 0
    dtypes: Counter = field(default_factory=Counter)
    sites: list[str] = field(default_factory=list)
    name: str = ""  # given by `name_them`


@dataclass
class Observed:
    workloads: list[Seen] = field(default_factory=list)  # in the order first seen
    unfit: dict[str, str] = field(default_factory=dict)  # site -> why its adapter refused a call (the first one)

    def add(self, kernel: str, site: str, seen: _Seen) -> None:
        entry = next((w for w in self.workloads if w.kernel == kernel and w.params == seen.workload), None)
        if entry is None:
            entry = Seen(kernel, seen.workload)
            self.workloads.append(entry)
        entry.calls += 1
        entry.dtypes[seen.dtype] += 1
        if site not in entry.sites:
            entry.sites.append(site)


def observe(step, found: plugins.Registry) -> Observed:
    """Run `step` once with every kernel site of the registry whose module is imported observed; what each
    kernel would have been called with."""
    observed = Observed()
    installed = []
    try:
        for site in registry.kernel_sites():
            if site.module in sys.modules and site.kernel in found.kernels():
                spec = plugins.load_spec(found.kernel_dir(site.kernel), site.kernel)
                installed.append(registry.install(site, functools.partial(_observing, site, StandIn(spec),
                                                                          observed)))
        if installed:
            step()
    finally:
        while installed:
            registry.restore(installed.pop())
    return observed


def _observing(site: registry.Site, kernel: StandIn, observed: Observed, original):
    replacement = site.adapter(original, kernel)

    @functools.wraps(original)
    def observed_call(*args, **kwargs):
        try:
            replacement(*args, **kwargs)
        except _Seen as seen:
            observed.add(site.kernel, site.function, seen)
        except adapters.Unfit as exc:
            observed.unfit.setdefault(site.function, str(exc))
        except Exception as exc:  # the adapter fails on this model: say so; the step itself must not fail for it
            observed.unfit.setdefault(site.function, f"the adapter failed: {type(exc).__name__}: {exc}")
        return original(*args, **kwargs)

    return observed_call


def workload_name(target: str, preset: str | None) -> str:
    """llama_step + tiny -> llama_step_tiny: a workload name of a matrix (lower case, digits, _ . -)."""
    name = re.sub(r"[^a-z0-9_.-]+", "_", "_".join(p for p in (target, preset) if p).lower()).strip("_.-")
    return name if re.match(r"^[a-z0-9]", name) else f"model_{name}".rstrip("_")


def name_them(observed: Observed, base: str) -> list[Seen]:
    """Each workload named: `base` where a kernel saw one shape, base_1, base_2 ... (most calls first) where it
    saw several. Returned per kernel, in the order kernels were first seen."""
    out = []
    for kernel in dict.fromkeys(w.kernel for w in observed.workloads):
        mine = sorted((w for w in observed.workloads if w.kernel == kernel), key=lambda w: -w.calls)
        for i, w in enumerate(mine, 1):
            w.name = base if len(mine) == 1 else f"{base}_{i}"
        out += mine
    return out


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v) if isinstance(v, str) else repr(v)


def fragment(workloads: list[Seen], observed: Observed, header: list[str], vendor: str) -> str:
    """The workloads file: a commented header (what was profiled, how to include it), a table per workload."""
    lines = [f"# {line}" for line in header]
    lines += ["# Include it in a matrix file with `workloads_from = \"<this file, relative to the matrix file>\"`",
              "# and name its workloads in a [[kernel]] like the kernel's own:"]
    for kernel in dict.fromkeys(w.kernel for w in workloads):
        mine = [w for w in workloads if w.kernel == kernel]
        names = ", ".join(f'"{w.name}"' for w in mine)
        dtypes = ", ".join(f'"{d}"' for d in dict.fromkeys(d for w in mine for d in w.dtypes))
        lines += ["#   [[kernel]]", f"#   name = \"{kernel}\"", f"#   workloads = {{ {vendor} = [{names}] }}",
                  f"#   dtypes = {{ {vendor} = [{dtypes}] }}"]
    if not workloads:
        lines += ["# (none here: the step called no model site a kernel replaces; the sites are in",
                  "# opmatrix/sites/registry.py)"]
    lines += [f"# {site} was not observed: {why}" for site, why in observed.unfit.items()]
    for w in workloads:
        dtypes = ", ".join(w.dtypes)
        lines += ["", f"# {w.calls} call(s) in the step, {dtypes}, at {', '.join(w.sites)}",
                  f"[workload.{w.kernel}.{w.name}]"]
        lines += [f"{k} = {_value(v)}" for k, v in w.params.items()]
    return "\n".join(lines) + "\n"


def summary(workloads: list[Seen], observed: Observed) -> list[str]:
    """One line per workload (and per site not observed), for the terminal and profile.md."""
    lines = [f"{w.kernel} {w.name}: {' '.join(f'{k}={v}' for k, v in w.params.items())} "
             f"({w.calls} call(s), {', '.join(w.dtypes)})" for w in workloads]
    return lines + [f"{site} not observed: {why}" for site, why in observed.unfit.items()]
