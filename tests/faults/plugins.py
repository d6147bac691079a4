"""The misbehaving kernels and backends of the fault suite, written into a test's own folder.

Every implementation file is rendered by `impl()` from a small body: the one place a fault's `build` is written,
so a change of the plugin contract (build returning a `Built(fn, config, cache)` object) is one edit here.

Two kernel specs:
- TORCH_SPEC: CPU torch tensors, run in a `system = true` cell (the host's torch). Its tolerance is loose, like a
  bf16 tolerance, so the norm-wise check alone cannot see an error confined to 1 % of the elements.
- PLAIN_SPEC: small CPU torch vectors whose kernel sleeps a different time per call in each workload, so a row's
  timing says which job produced it (run-level faults: signals, locks, resume), in the host toolchain.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

TORCH_SPEC = '''
WORKLOADS = {"small": {"n": 4096}}

def describe(w): return f"n={w['n']}"
def flops(w): return float(w["n"])
def min_bytes(w, dtype): return 8.0 * w["n"]
def tolerance(dtype): return 5e-3

def make_inputs(w, dtype, device, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(w["n"], generator=g, dtype=getattr(torch, dtype)),)

def make_output(w, dtype, device):
    import torch
    return torch.empty(w["n"], dtype=getattr(torch, dtype))

def reference(inputs, w):
    return inputs[0].double() * 2
'''

PLAIN_SPEC = '''
# n and the sleep per call differ per workload: a row's shape and timing name the job that made it
WORKLOADS = {"w0": {"n": 16, "ms": 0.5}, "w1": {"n": 32, "ms": 2.0}, "w2": {"n": 64, "ms": 6.0}}

def describe(w): return f"n={w['n']}"
def flops(w): return float(w["n"])
def min_bytes(w, dtype): return 8.0 * w["n"]
def tolerance(dtype): return 1e-6

def make_inputs(w, dtype, device, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(w["n"], generator=g, dtype=getattr(torch, dtype)) * 2 - 1,)

def make_output(w, dtype, device):
    import torch
    return torch.empty(w["n"], dtype=getattr(torch, dtype))

def reference(inputs, w):
    return inputs[0].double() * 2
'''

TEMPLATE = '''{prelude}


def build(w, dtype, device, variant):
{setup}    def fn(x, out):
{call}

    return fn
'''


def impl(call: str, prelude: str = "", setup: str = "") -> str:
    """kernels/<kernel>/<backend>.py: `build` runs `setup`, then returns fn(x, out) whose body is `call`.
    The only place an implementation's build is written (see the module docstring)."""
    setup = textwrap.dedent(setup).strip()
    return TEMPLATE.format(prelude=textwrap.dedent(prelude).strip(),
                           setup=textwrap.indent(setup, " " * 4) + "\n" if setup else "",
                           call=textwrap.indent(textwrap.dedent(call).strip(), " " * 8)).lstrip()


def adapter(timed: bool | str | None = True, prelude: str = "") -> str:
    """backends/<backend>.py covering every device (the contract's defaults: covers none out, no environment);
    `timed` falsy: correctness only. `prelude` runs at import (a broken adapter puts it there)."""
    return textwrap.dedent(prelude).strip() + f'''

TIMED = {bool(timed)!r}

def available():
    return "fault-suite"
'''


# The CPU kernel faults: backend -> implementation. Each is a backend of its own, run in the same cell as the
# healthy `torch` (the baseline) and `good`.
HEALTHY = impl("out.copy_(x * 2)")
TORCH_FAULTS = {
    "segfault": impl("ctypes.string_at(0)", prelude="import ctypes"),
    "nonfinite": impl("out.copy_(x * 2)\nout[7] = float('nan')\nout[9] = float('inf')"),  # NaN and Inf
    "partial": impl("out[:-1].copy_(x[:-1] * 2)"),  # the last element is never written
    "wrong": impl("out.copy_(x * 2 + 1)"),
    # 1 % of the elements off by 1 %: the norm-wise error (1e-3) is under the tolerance (5e-3); only an
    # element-wise check sees it
    "localised": impl("out.copy_(x * 2)\nout[::100] *= 1.01"),
    "broken": impl("return x", setup="raise RuntimeError(\"error: no viable overload for 'tl.dot' "
                   "(compiler error injected by the fault suite)\")"),
    "importerr": HEALTHY,  # its adapter raises ImportError at import
}
HANG = impl("time.sleep(3600)", prelude="import time")
BROKEN_ADAPTER_IMPORT = "import opmatrix_fault_suite_missing_module  # raises ImportError at import"


def plain_impl(crash_once: Path | None = None, gate: Path | None = None, later_gate: Path | None = None,
               escape: bool = False) -> str:
    """The PLAIN_SPEC kernel: sleeps its workload's time per call. Building takes 0.15 s, so a group of jobs
    lasts long enough to be interrupted. crash_once: the first worker ever to run workload w0 creates that file
    and segfaults (a transient crash that --redo crashed runs again). gate: every build waits until that file
    exists (bounded by the job's time limit), so a test decides when the run may go on. later_gate: the same for
    every build but w0's (the first row lands, then the run waits). escape: every build starts `setsid sleep 600`,
    a process in a session of its own, which outlives the worker's process group."""
    setup = "time.sleep(0.15)"
    if escape:
        setup += ("\nimport subprocess\nsubprocess.Popen(['setsid', 'sleep', '600'], stdin=subprocess.DEVNULL, "
                  "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)")
    if gate is not None:
        setup += f"\nwhile not pathlib.Path({str(gate)!r}).exists():\n    time.sleep(0.01)"
    if later_gate is not None:
        setup += f"\nwhile w['n'] != 16 and not pathlib.Path({str(later_gate)!r}).exists():\n    time.sleep(0.01)"
    if crash_once is not None:
        setup += (f"\nmarker = pathlib.Path({str(crash_once)!r})\nif w['n'] == 16 and not marker.exists():\n"
                  "    marker.touch()\n    ctypes.string_at(0)")
    return impl("time.sleep(w['ms'] / 1e3)\nout.copy_(x * 2)", prelude="import ctypes, pathlib, time",
                setup=setup)


def write_tree(root: Path, kernels: dict[str, tuple[str, dict[str, str]]], adapters: dict[str, str]) -> None:
    """root/kernels/<kernel>/{spec.py, <backend>.py...} and root/backends/<backend>.py."""
    for kernel, (spec, impls) in kernels.items():
        folder = root / "kernels" / kernel
        folder.mkdir(parents=True)
        (folder / "spec.py").write_text(spec)
        for backend, code in impls.items():
            (folder / f"{backend}.py").write_text(code)
    (root / "backends").mkdir(parents=True)
    for backend, code in adapters.items():
        (root / "backends" / f"{backend}.py").write_text(code)


PLAIN_MATRIX = """
name = "plain"
backends = ["torch"]
[run]
timeout_s = 30
warmup_ms = 0
rep_ms = 5
rounds = 10
max_rounds = 10
burst_ms = 2
burst_warmup_ms = 0
kernels_dir = "kernels"
backends_dir = "backends"
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
[[toolchain]]
name = "host"  # the interpreter's own torch
system = true
[[kernel]]
name = "plain"
workloads = { cpu = ["w0", "w1", "w2"] }
dtypes = { cpu = ["float32"] }
"""


def plain_matrix(root: Path, crash_once: Path | None = None, gate: Path | None = None,
                 later_gate: Path | None = None, escape: bool = False, workloads: tuple = ("w0", "w1", "w2")) -> Path:
    """root/m.toml: the PLAIN_SPEC kernel, one backend (the baseline), three workloads (or those named), in the
    host toolchain."""
    write_tree(root, {"plain": (PLAIN_SPEC, {"torch": plain_impl(crash_once, gate, later_gate, escape)})},
               {"torch": adapter("wallclock")})
    text = textwrap.dedent(PLAIN_MATRIX).replace('["w0", "w1", "w2"]', "[" + ", ".join(f'"{w}"' for w in workloads) + "]")
    (root / "m.toml").write_text(text)
    return root / "m.toml"
