"""Swaps: a chosen implementation of a kernel (backend[variant]), loaded through the plugin loader of a matrix run
(opmatrix.incell.plugins: kernels/<kernel>/<backend>.py and backends/<backend>.py, checked against their
contracts), put in place of the registry's sites for that kernel while a swap is active, and taken out after.

The patches are module / class attributes, so the unmodified and the swapped step run the same model object on the
same inputs: a swap is active only around the calls that should see it (one timing burst, one checked step).
"""
from __future__ import annotations

import contextlib
import platform
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from opmatrix.core.errors import UsageError
from opmatrix.core.jobs import DeviceInfo
from opmatrix.core.result import backend_label, split_backend_label
from opmatrix.incell import plugins
from opmatrix.sites import registry


@dataclass(frozen=True)
class Choice:
    kernel: str
    backend: str
    variant: str = "default"

    @property
    def label(self) -> str:
        return backend_label(self.backend, self.variant)

    def text(self) -> str:
        return f"{self.kernel}={self.label}"


def parse_use(text: str) -> list[Choice]:
    """--use rope=triton,swiglu=tilelang[tuned] -> Choices, one per kernel."""
    choices: dict[str, Choice] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        kernel, sep, label = part.partition("=")
        split = split_backend_label(label)
        if not sep or not kernel.strip() or not split:
            raise UsageError(f"--use {text}: {part!r} is not KERNEL=BACKEND or KERNEL=BACKEND[VARIANT] (e.g. "
                             "rope=triton,swiglu=tilelang[tuned])")
        kernel = kernel.strip()
        if kernel in choices:
            raise UsageError(f"--use {text}: kernel {kernel} is named twice; choose one implementation per kernel")
        choices[kernel] = Choice(kernel, *split)
    if not choices:
        raise UsageError(f"--use {text!r}: name at least one KERNEL=BACKEND")
    return list(choices.values())


def device_info(device: str) -> DeviceInfo:
    """The device as kernel implementations see it in a matrix run (vendor, arch), for this process's device."""
    import torch

    if device == "cpu":
        return DeviceInfo("cpu", "cpu", platform.machine(), "cpu")
    index = torch.device(device).index or 0
    props = torch.cuda.get_device_properties(index)
    if torch.version.hip:
        return DeviceInfo(device, "amd", getattr(props, "gcnArchName", "").split(":")[0], props.name)
    return DeviceInfo(device, "nvidia", f"sm_{props.major}{props.minor}", props.name)


def dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


class Kernel:
    """One implementation of a kernel, built on first use for each workload the model calls it with. Calling it
    with (workload, inputs) returns the kernel's output tensor (freshly allocated as the spec's make_output lays it
    out, as the model's own code allocates its result)."""

    def __init__(self, choice: Choice, kernels_dir: Path, backends_dir: Path | None, device: DeviceInfo):
        self.choice, self.device = choice, device
        self.spec = plugins.load_spec(kernels_dir, choice.kernel)
        path = plugins.impl_path(kernels_dir, choice.kernel, choice.backend)
        variants = plugins.declared_variants(path)
        if path.is_file() and choice.variant not in variants:
            raise UsageError(f"--use {choice.text()}: {path} declares variants {', '.join(variants)}")
        self.impl = plugins.load_impl(kernels_dir, choice.kernel, choice.backend)
        self.returns_output = getattr(self.impl, "RETURNS_OUTPUT", False)
        self.built: dict[tuple, object] = {}
        self.workloads: list[dict] = []  # every workload it was called with, in order
        self.dtypes: list[str] = []
        self.calls = 0
        # no adapter anywhere (backends_dir None): the kernel's own file is all there is
        self.backend = plugins.load_backend(backends_dir, choice.backend) if backends_dir is not None else None

    def check_backend(self) -> None:
        """UsageError unless the backend imports here, covers this device, and times meaningfully on it."""
        if self.backend is None:
            return  # a kernel file without a backend adapter (a user's own): nothing to ask
        label = self.choice.text()
        try:
            self.backend.available()
        except plugins.Unavailable as exc:
            raise UsageError(f"--use {label}: {exc}") from None
        reason = self.backend.covers(self.device)
        if reason:
            raise UsageError(f"--use {label}: does not run on {self.device.id}: {reason}")
        if not self.backend.timed(self.device):
            raise UsageError(f"--use {label}: on {self.device.id} its timings mean nothing (a matrix run checks it "
                             "for correctness only); validate it on a device it is timed on")

    def __call__(self, workload: dict, inputs: tuple):
        dtype = dtype_name(inputs[0].dtype)
        key = (tuple(sorted(workload.items())), dtype)
        fn = self.built.get(key)
        if fn is None:
            fn = self._build(workload, dtype)
        self.calls += 1
        out = None if self.returns_output else self.spec.make_output(workload, dtype, str(inputs[0].device))
        result = fn(*inputs, out)
        return result if self.returns_output else out

    def _build(self, workload: dict, dtype: str):
        try:
            built = plugins.built_from(self.impl.build(workload, dtype, self.device, self.choice.variant),
                                       Path(self.impl.__file__))
        except plugins.Unsupported as exc:
            raise plugins.Unsupported(f"{self.choice.text()} on {self.spec.describe(workload)} {dtype}: {exc}") \
                from None
        self.built[(tuple(sorted(workload.items())), dtype)] = built.fn
        self.workloads.append(dict(workload))
        self.dtypes.append(dtype)
        return built.fn


@dataclass
class Swap:
    """A kernel's chosen implementation and the registry sites it replaces."""

    kernel: Kernel
    sites: tuple[registry.Site, ...]
    originals: list = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.kernel.choice.text()

    def install(self) -> None:
        for site in self.sites:
            self.originals.append(registry.install(site, lambda original, s=site: s.adapter(original, self.kernel)))

    def remove(self) -> None:
        while self.originals:
            registry.restore(self.originals.pop())


def make_swaps(choices: list[Choice], found: plugins.Registry, device: DeviceInfo) -> list[Swap]:
    """A Swap per choice, its implementation loaded and its backend checked, each kernel and backend from where a
    run would take it (`found`: the project's own folders, installed packages, the shipped plugins); UsageError for
    a kernel no registry site takes or no plugin source has."""
    swaps = []
    for choice in choices:
        sites = registry.swap_sites(choice.kernel)
        if not sites:
            raise UsageError(f"--use {choice.text()}: no model site is wired to kernel {choice.kernel!r} "
                             f"(wired: {', '.join(registry.swappable())}); add a Site to "
                             "opmatrix/sites/registry.py to wire it")
        try:
            kernels_dir = found.kernel_dir(choice.kernel)
            backends_dir = found.backend_dir(choice.backend) if choice.backend in found.backends() else None
        except plugins.PluginError as exc:
            raise UsageError(f"--use {choice.text()}: {exc}") from None
        if not plugins.impl_path(kernels_dir, choice.kernel, choice.backend).is_file():
            folder = Path(kernels_dir) / choice.kernel
            have = sorted(p.stem.replace("_", "-") for p in folder.glob("*.py") if p.stem != "spec")
            raise UsageError(f"--use {choice.text()}: no {plugins.module_file(choice.backend)} in {folder} "
                             f"(backends there: {', '.join(have) or 'none'})")
        kernel = Kernel(choice, kernels_dir, backends_dir, device)
        kernel.check_backend()
        swaps.append(Swap(kernel, sites))
    return swaps


@contextlib.contextmanager
def active(swaps: list[Swap]) -> Iterator[None]:
    """The swaps installed for the duration of the block, the model's own code put back after."""
    try:
        for s in swaps:
            s.install()
        yield
    finally:
        for s in reversed(swaps):
            s.remove()
