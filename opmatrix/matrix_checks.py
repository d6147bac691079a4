"""What a matrix file's types cannot say: strings that reach pip and nox are what they claim to be, names are
unique, and references point at something the file defines.

Package strings become pip arguments and index URLs pip options, so a string that is a pip option ("-r/etc/x"),
shell text or a URL is refused, not passed on. Every refusal is a `Problem`: the key path, the value and what is
allowed; `opmatrix.matrix` turns a list of them into one MatrixError.
"""
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import ValidationInfo

if TYPE_CHECKING:
    from opmatrix.matrix import KernelEntry, Matrix

IDENT = r"^[a-z0-9][a-z0-9_.-]*$"  # a name a matrix file gives (device, toolchain, workload): one path component
NAME_MAX = 64  # ... and at most this long: names join into folder names (cells, nox sessions) a file system bounds
PYTHONS = tuple(f"3.{n}" for n in range(8, 15))
SHELL_CHARS = frozenset("$`|&\\{}")  # no requirement needs them; a shell would act on them
EXCLUDE_KEYS = ("device", "toolchain", "kernel", "backend", "workload", "dtype", "variant")
REQUIREMENT = ("allowed: a PEP 508 requirement such as 'torch==2.5.1', 'triton>=3.1,<4' or "
               "'numpy; python_version < \"3.13\"'")


class Problem(NamedTuple):
    """One thing wrong in a matrix file: where (a key path), the offending value, and what is allowed."""
    key: str
    value: object
    message: str


NO_VALUE = object()  # the value of a Problem about a missing key or a whole table


def requirement(value: str, info: ValidationInfo) -> str:
    """A toolchain package: a PEP 508 requirement with PEP 440 versions; a URL only where the toolchain allows."""
    if value.startswith("-"):
        raise ValueError(f"a pip option, not a package; {REQUIREMENT}")
    bad = sorted({c for c in value if c in SHELL_CHARS or not c.isprintable()})
    if bad:
        raise ValueError(f"contains {''.join(bad)!r}, which no requirement needs; {REQUIREMENT}")
    try:
        req = Requirement(value)
    except InvalidRequirement as exc:
        raise ValueError(f"not a PEP 508 requirement ({str(exc).splitlines()[0]}); {REQUIREMENT}") from None
    if req.url and not info.data.get("allow_urls"):
        raise ValueError(f"a direct URL reference; {REQUIREMENT}, or set allow_urls = true in this toolchain")
    for spec in req.specifier:
        if spec.operator == "===":
            raise ValueError("arbitrary equality (===) matches any text; allowed: ==, !=, <=, >=, <, >, ~= with "
                             "a PEP 440 version")
        try:
            Version(spec.version.removesuffix(".*"))
        except InvalidVersion:
            raise ValueError(f"{spec.version!r} is not a PEP 440 version; {REQUIREMENT}") from None
    return value


def index_url(value: str) -> str:
    """A package index: an http(s) URL with a host (never javascript:, file:, ftp: or a bare word)."""
    try:
        parts = urlsplit(value)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        ok = False
    if not ok or any(c.isspace() or not c.isprintable() for c in value):
        raise ValueError("not an index URL; allowed: an http:// or https:// URL with a host, such as "
                         "'https://download.pytorch.org/whl/cu130'")
    return value


VERSION_RANGE = ("allowed: PEP 440 version specifiers such as '>=590,<600', '==590.*' or '!=590.12', or a version "
                 "or prefix alone such as '13.*' (read as ==13.*)")


def version_specifier(text: str) -> SpecifierSet:
    """The versions a host fact may have (a device's driver or runtime range): a PEP 440 specifier set, a bare
    version or prefix meaning ==. Raises ValueError saying what is allowed. The one parser of these ranges, for the
    matrix check and for host matching alike."""
    text = text.strip()
    if not text:
        raise ValueError(f"empty; {VERSION_RANGE}")
    try:
        spec = SpecifierSet(f"=={text}" if text[0].isdigit() else text)
    except InvalidSpecifier:
        raise ValueError(f"not a version range; {VERSION_RANGE}") from None
    if any(s.operator == "===" for s in spec):
        raise ValueError(f"arbitrary equality (===) matches any text; {VERSION_RANGE}")
    return spec


def version_range(value: str) -> str:
    version_specifier(value)
    return value


def local_folder(value: str) -> str:
    """A toolchain's find_links: an absolute path to a folder that exists (pip --find-links), never a URL (file:
    or otherwise: `index` is for those) and never text pip or a shell would read as an option."""
    bad = sorted({c for c in value if c in SHELL_CHARS or not c.isprintable()})
    if bad or not value.startswith("/") or "://" in value:
        raise ValueError("not an absolute folder path; allowed: a local folder of wheels such as '/srv/wheels' "
                         "(an index URL goes in `index`)")
    if not os.path.isdir(value):
        raise ValueError("no such folder on this host; create it (pip --find-links reads the wheels in it) or fix "
                         "the path")
    return value


def python(value: str | None) -> str | None:
    """A Python that exists: '3.N' for a released 3.N, or an absolute path to an interpreter."""
    if value is None or value in PYTHONS or re.fullmatch(r"/[A-Za-z0-9_./+-]+", value):
        return value
    raise ValueError(f"no such Python; allowed: {', '.join(PYTHONS)}, or an absolute path to an interpreter "
                     "such as '/usr/bin/python3.11'")


def env_value(value: str) -> str:
    if "\0" in value:
        raise ValueError("contains a NUL character, which no environment variable can hold")
    return value


def cross_references(m: Matrix) -> list[Problem]:
    """Repeated names, and references to devices, toolchains, kernels, backends, workloads or dtypes this file
    does not define. Variants are declared by implementation files: `opmatrix.catalog` checks those."""
    out = _repeats("device", [d.id for d in m.device], ".id") + _repeats("backends", m.backends)
    out += _repeats("toolchain", [t.name for t in m.toolchain], ".name")
    out += _repeats("kernel", [k.name for k in m.kernel], ".name")
    devices = used(m, m.kernel, "device")
    for i, tc in enumerate(m.toolchain):
        out += _repeats(f"toolchain[{i}].packages", tc.packages) + _repeats(f"toolchain[{i}].devices", tc.devices or [])
        out += [unknown(f"toolchain[{i}].devices[{j}]", dev, devices, "device of this file")
                for j, dev in enumerate(tc.devices or []) if dev not in devices]
    for i, k in enumerate(m.kernel):
        out += _repeats(f"kernel[{i}].backends", k.backends or [])
        for table in ("workloads", "dtypes"):
            for vendor, names in getattr(k, table).items():
                out += _repeats(f"kernel[{i}].{table}.{vendor}", names)
    runs = used(m, m.kernel, "backend")
    if "baseline" in m.acceptance.model_fields_set and m.acceptance.baseline not in runs:
        out.append(unknown("acceptance.baseline", m.acceptance.baseline, runs, "backend this file runs"))
    for i, ex in enumerate(m.exclude):
        named = [k for k in m.kernel if k.name == ex.kernel]  # an exclude naming a kernel: that kernel's names
        scope = f" for kernel {ex.kernel!r}" if named else ""
        for key in EXCLUDE_KEYS[:-1]:
            value = getattr(ex, key)
            allowed = used(m, m.kernel if key == "kernel" else named or m.kernel, key)
            if value is not None and value not in allowed:
                out.append(unknown(f"exclude[{i}].{key}", value, allowed, f"{key} of this file{scope}"))
    out += compare_references(m) + compare_hosts_references(m)
    return out


def compare_references(m: Matrix) -> list[Problem]:
    """A [[compare]] names two different toolchains of this file; a toolchain is the candidate of one compare
    at most, and never also a baseline (its cells run inside the baseline's)."""
    out, names = [], [t.name for t in m.toolchain]
    candidates = [c.candidate for c in m.compare]
    out += _repeats("compare", candidates, ".candidate")
    for i, c in enumerate(m.compare):
        for side in ("baseline", "candidate"):
            if getattr(c, side) not in names:
                out.append(unknown(f"compare[{i}].{side}", getattr(c, side), names, "toolchain of this file"))
        if c.baseline == c.candidate:
            out.append(Problem(f"compare[{i}].candidate", c.candidate, "is also the baseline; name two toolchains "
                               "(for an A/A check, declare the same toolchain twice under two names)"))
        if c.baseline in candidates:
            out.append(Problem(f"compare[{i}].baseline", c.baseline, "is the candidate of another compare; chain "
                               "upgrades as separate matrix files"))
    return out


def compare_hosts_references(m: Matrix) -> list[Problem]:
    """A [[compare_hosts]] names two or three different devices of this file, and a toolchain of it (needed when it
    has several)."""
    out, devices, toolchains = [], {d.id for d in m.device}, [t.name for t in m.toolchain]
    for i, c in enumerate(m.compare_hosts):
        named = [(side, getattr(c, side)) for side in ("baseline", "candidate", "host_aa") if getattr(c, side)]
        out += [unknown(f"compare_hosts[{i}].{side}", dev, devices, "device of this file") for side, dev in named
                if dev not in devices]
        out += [Problem(f"compare_hosts[{i}].{side}", dev, "names a device another side of this comparison names; "
                        "name two (or three) different devices") for k, (side, dev) in enumerate(named)
                if dev in [d for _, d in named[:k]]]
        if c.toolchain is not None and c.toolchain not in toolchains:
            out.append(unknown(f"compare_hosts[{i}].toolchain", c.toolchain, toolchains, "toolchain of this file"))
        if c.toolchain is None and len(toolchains) > 1:
            out.append(Problem(f"compare_hosts[{i}]", NO_VALUE, f"this file has {len(toolchains)} toolchains: name "
                               f"the one to compare with toolchain = (one of {', '.join(toolchains)})"))
    return out


def used(m: Matrix, kernels: list[KernelEntry], key: str) -> set[str]:
    """The names of one kind (device, toolchain, kernel, backend, workload, dtype) the matrix uses for kernels."""
    if key == "device":
        return {d.id for d in m.device}
    if key == "toolchain":
        return {t.name for t in m.toolchain}
    if key == "kernel":
        return {k.name for k in kernels}
    if key == "backend":
        return {b for k in kernels for b in (k.backends or m.backends)}
    table = {"workload": "workloads", "dtype": "dtypes"}[key]
    return {name for k in kernels for names in getattr(k, table).values() for name in names}


def _repeats(where: str, values: list[str], suffix: str = "") -> list[Problem]:
    """A Problem at each repeat of a value, pointing back at its first occurrence."""
    first: dict[str, int] = {}
    out = []
    for i, value in enumerate(values):
        if value in first:
            out.append(Problem(f"{where}[{i}]{suffix}", value,
                               f"repeats {where}[{first[value]}]{suffix}; each must be unique"))
        first.setdefault(value, i)
    return out


def unknown(key: str, value: str, allowed, what: str) -> Problem:
    """`allowed`: a set (listed sorted) or a sequence (listed in its order)."""
    listed = ", ".join(sorted(allowed) if isinstance(allowed, (set, frozenset)) else allowed)
    return Problem(key, value, f"names no {what}; allowed: {listed or '(none)'}")
