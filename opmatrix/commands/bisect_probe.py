"""What `opmatrix bisect` probes, and how: the versions between good and bad from the package index the toolchain
names, and one probe as a real run of a matrix derived from the user's.

A probe's matrix is the user's, cut down to the target: its one device, the chosen kernel with one workload and
one dtype, the target backend beside the acceptance baseline (timed in every round with its A/A twin), and the
chosen toolchain twice, pinned to the good version and to the probed one, declared as a [[compare]] so that one cell
runner times both in the same rounds. The good side's environment is the same in every probe (same pins, same
name), so it is built once and reused. Each probe is a run folder of its own under the bisection's folder, read
back by opmatrix.upgrade.compare like any run with a [[compare]].
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from opmatrix import paths
from opmatrix.core.result import backend_label, split_backend_label
from opmatrix.matrix import Matrix
from opmatrix.upgrade import bisect, compare
from opmatrix.upgrade.bisect import Probe


class BisectError(ValueError):
    """Arguments that do not fit the matrix or the index; the message names the choices."""


@dataclass(frozen=True)
class Target:
    """What the bisection watches: one row of the probe's comparison."""

    device: str
    toolchain: str
    kernel: str
    workload: str
    dtype: str
    backend: str
    variant: str | None  # None: the backend's only (or default) variant

    def label(self) -> str:
        return f"{self.device} {self.kernel} {self.workload} {self.dtype} " + \
            (backend_label(self.backend, self.variant) if self.variant else self.backend)


def _only(what: str, flag: str, given: str | None, choices: list[str]) -> str:
    if given is not None:
        if given not in choices:
            raise BisectError(f"{flag} {given}: the matrix has no such {what}; choices: {', '.join(choices) or '(none)'}")
        return given
    if len(choices) != 1:
        raise BisectError(f"the matrix has {len(choices)} {what}s ({', '.join(choices) or 'none'}): choose one with "
                          f"{flag}")
    return choices[0]


def choose_target(m: Matrix, package: str | None, device: str | None, toolchain: str | None, kernel: str | None,
                  workload: str | None, dtype: str | None, backend: str | None) -> Target:
    """The target row from the flags, each defaulting to the matrix's only choice (an error lists them); the
    toolchain by default the one that pins `package` (None: toolchains are searched, the first named is given)."""
    dev = m.devices()[_only("device", "--device", device, [d.id for d in m.device])]
    named = [t.name for t in m.toolchain if package and any(_is(p, package) for p in t.packages)]
    tc = _only("toolchain", "--toolchain", toolchain, named or [t.name for t in m.toolchain])
    entry = {k.name: k for k in m.kernel}[_only("kernel", "--kernel", kernel, [k.name for k in m.kernel])]
    wl = _only(f"workload for {dev.vendor}", "--workload", workload, entry.workloads.get(dev.vendor, []))
    dt = _only(f"dtype for {dev.vendor}", "--dtype", dtype, entry.dtypes.get(dev.vendor, []))
    runs = [b for b in entry.backends or m.backends if b != m.acceptance.baseline] or [m.acceptance.baseline]
    label = split_backend_label(backend) if backend else None
    if backend and label is None:
        raise BisectError(f"--backend {backend}: not a backend label; allowed: a backend such as triton, or one "
                          "variant of it such as tilelang[cpu]")
    name = _only("backend", "--backend", label[0] if label else None, runs)
    variant = label[1] if label and "[" in backend else None
    return Target(dev.id, tc, entry.name, wl, dt, name, variant)


def _is(requirement: str, package: str) -> bool:
    return canonicalize_name(Requirement(requirement).name) == canonicalize_name(package)


def available_versions(m: Matrix, target: Target, package: str) -> list[str]:
    """Every version of `package` the toolchain's indexes offer (its find_links folder and index for the device's
    vendor, besides pip's own configuration), from `pip index versions --json`, oldest first."""
    tc = {t.name: t for t in m.toolchain}[target.toolchain]
    vendor = m.devices()[target.device].vendor
    args = [sys.executable, "-m", "pip", "index", "versions", package, "--json", "--pre"]
    if tc.find_links:
        args += ["--find-links", tc.find_links]
    if tc.index.get(vendor):
        args += ["--extra-index-url", tc.index[vendor]]
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise BisectError(f"pip index versions {package}: no versions found in the toolchain's indexes "
                          f"({(out.stderr.strip().splitlines() or ['no output'])[-1]}); pass them with --versions")
    return sorted(json.loads(out.stdout)["versions"], key=Version)


def between(available: list[str], good: str, bad: str) -> list[str]:
    """The versions from good to bad inclusive, in version order; both must be offered."""
    for flag, v in (("--good", good), ("--bad", bad)):
        if v not in available:
            raise BisectError(f"{flag} {v}: not a version the index offers; versions: {', '.join(available)}")
    if Version(good) >= Version(bad):
        raise BisectError(f"--good {good} is not older than --bad {bad}: bisection looks for the first bad version "
                          "after a good one")
    return [v for v in available if Version(good) <= Version(v) <= Version(bad)]


def listed(text: str) -> list[str]:
    """--versions V1,V2,...: the good version first, the bad one last, each a PEP 440 version, in order."""
    versions = [v.strip() for v in text.split(",") if v.strip()]
    try:
        parsed = [Version(v) for v in versions]
    except InvalidVersion as exc:
        raise BisectError(f"--versions {text}: {exc}; allowed: PEP 440 versions, good first, bad last") from None
    if len(versions) < 2 or parsed != sorted(set(parsed)):
        raise BisectError(f"--versions {text}: give two or more distinct versions in increasing order, the good "
                          "one first and the bad one last")
    return versions


# ---- one probe ------------------------------------------------------------------------------------------------

def side_name(package: str, version: str) -> str:
    """A toolchain name for the package pinned at `version` (matrix IDENT: lower case, digits, '_.-')."""
    return re.sub(r"[^a-z0-9_.-]", "-", f"{canonicalize_name(package)}-{version}".lower())


def named(m: Matrix, text: str) -> list[str]:
    """--toolchains T1,T2,...: toolchains of the matrix, the good one first, the bad one last (each one step of
    whatever the fleet changed: packages, their index, Python, environment variables)."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    choices = [t.name for t in m.toolchain]
    unknown = [n for n in names if n not in choices]
    if unknown:
        raise BisectError(f"--toolchains {text}: the matrix has no toolchain {', '.join(unknown)}; choices: "
                          f"{', '.join(choices)}")
    if len(names) < 2 or len(set(names)) != len(names):
        raise BisectError(f"--toolchains {text}: give two or more distinct toolchains in order, the good one first "
                          "and the bad one last")
    return names


def probe_matrix(m: Matrix, target: Target, package: str | None, good: str, version: str) -> dict:
    """The derived matrix (as TOML data) of one probe: `version` against `good` on the target's row. With a
    package, the target's toolchain twice, pinned to each version; without (--toolchains), the two toolchains of
    the matrix named `good` and `version`, as they are."""
    # workloads_from's files are merged into `workload` already, and their paths are relative to the matrix file
    data = m.model_dump(exclude_defaults=True, exclude={"source", "exclude", "compare", "workloads_from"})
    data["name"] = f"bisect-{side_name(package or 'toolchains', 'probe')}"
    run = data.setdefault("run", {})
    run.update(kernels_dir=str(m.kernels_dir()), backends_dir=str(m.backends_dir()), compile_only=False)
    baseline = m.acceptance.baseline
    data["backends"] = sorted({baseline, target.backend})
    vendor = m.devices()[target.device].vendor
    data["device"] = [d for d in data["device"] if d["id"] == target.device]
    entry = next(k for k in data["kernel"] if k["name"] == target.kernel)
    entry.update(workloads={vendor: [target.workload]}, dtypes={vendor: [target.dtype]}, backends=data["backends"])
    data["kernel"] = [entry]
    sides = [_side(m, data, target, package, v) for v in (good, version)]
    data["toolchain"] = sides
    data["compare"] = [{"baseline": sides[0]["name"], "candidate": sides[1]["name"]}]
    data["exclude"] = _kept_excludes(m, target, data["backends"])
    return data


def _side(m: Matrix, data: dict, target: Target, package: str | None, step: str) -> dict:
    """One side of a probe as toolchain data: the target's toolchain pinned to version `step` of `package`, or (no
    package) the matrix's toolchain named `step`; on the probe's one device either way."""
    name = step if package is None else target.toolchain
    source = next(t for t in m.toolchain if t.name == name)
    tc = dict(next(t for t in data["toolchain"] if t["name"] == name))
    tc.pop("devices", None)
    if source.allow_urls:
        tc["allow_urls"] = True  # left out of dumps
    if package is None:
        return tc
    tc["name"] = side_name(package, step)
    tc["packages"] = [p for p in tc.get("packages", []) if not _is(p, package)] + [f"{package}=={step}"]
    return tc


def _kept_excludes(m: Matrix, target: Target, backends: list[str]) -> list[dict]:
    """The matrix's excludes that still apply to the probe's matrix (those of the target's toolchain apply to both
    sides, so they lose their toolchain key): `variant` excludes keep a probe to the variants that matter."""
    present = {"device": {target.device}, "toolchain": {target.toolchain}, "kernel": {target.kernel},
               "workload": {target.workload}, "dtype": {target.dtype}, "backend": set(backends)}
    kept = []
    for ex in m.exclude:
        values = ex.model_dump(exclude_defaults=True)
        if all(values[key] in names for key, names in present.items() if key in values):
            values.pop("toolchain", None)
            if any(k in values for k in ("device", "kernel", "backend", "workload", "dtype", "variant")):
                kept.append(values)
    return kept


def toml(data: dict) -> str:
    """A matrix's data as TOML: scalars, lists and inline tables at the top and in [tables], arrays of tables."""
    def value(v) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return "{ " + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + " }"

    def pairs(table: dict) -> list[str]:
        return [f"{k} = {value(v)}" for k, v in table.items()]

    lines = pairs({k: v for k, v in data.items() if not isinstance(v, (dict, list)) or k == "backends"})
    for key, v in data.items():
        if isinstance(v, dict):
            lines += ["", f"[{key}]", *pairs(v)]
        elif isinstance(v, list) and key != "backends":
            for item in v:
                lines += ["", f"[[{key}]]", *pairs(item)]
    return "\n".join(lines) + "\n"


def run_probe(m: Matrix, target: Target, package: str | None, good: str, version: str, folder: Path, number: int,
              scheduler_factory, watch=bisect.WATCH, console=None, resolution: float = bisect.RESOLUTION) -> Probe:
    """Run one probe as a run folder under `folder` and judge its target row."""
    from opmatrix.run import run
    from opmatrix.store import ResultStore, load_run

    run_id = re.sub(r"[^A-Za-z0-9._+-]", "-", f"probe-{number:02d}-{version}")
    path = folder / f"{run_id}.toml"
    path.write_text(toml(probe_matrix(m, target, package, good, version)), encoding="utf-8")
    done = run(path, reports_dir=folder, run_id=run_id, scheduler=scheduler_factory(), console=console,
               scratch_root=paths.SCRATCH / folder.name)  # the bisection's own: probe ids repeat between bisections
    base, cand = (good, version) if package is None else (side_name(package, good), side_name(package, version))
    comparison = compare.compare_paired(load_run(done), base, cand, m.acceptance.min_speedup, run_id,
                                        ResultStore(done, create=False).manifest())
    return bisect.judged(version, _target_row(comparison, target), run_id, watch, resolution)


def _target_row(comparison: compare.Comparison, target: Target) -> compare.RowChange | None:
    rows = [r for r in comparison.rows if (r.device, r.kernel, r.workload, r.dtype) ==
            (target.device, target.kernel, target.workload, target.dtype)]
    if target.variant is not None:
        return next((r for r in rows if r.label == backend_label(target.backend, target.variant)), None)
    own = [r for r in rows if split_backend_label(r.label)[0] == target.backend]
    return next((r for r in own if r.label == target.backend), own[0] if len(own) == 1 else None)
