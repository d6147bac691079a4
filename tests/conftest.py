import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def write_matrix(tmp_path):
    """Write a matrix file into tmp_path from TOML text; returns its path."""

    def write(text: str, name: str = "m.toml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


# A lightweight probe operator for scheduling and isolation tests: out = 2 * x on CPU tensors, whatever the device.
PROBE_SPEC = '''
WORKLOADS = {"small": {"n": 4096, "sleep": 0}, "quick": {"n": 256, "sleep": 0}, "slow": {"n": 256, "sleep": 8}}

def describe(w): return f"n={w['n']}"
def flops(w): return float(w["n"])
def min_bytes(w, dtype): return 8.0 * w["n"]
def tolerance(dtype): return 1e-6

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


def probe_adapter(timed=True) -> str:
    """A backend adapter over the host's torch that states only available(): the contract's defaults cover every
    device and set no environment. Timed unless `timed` is false (correctness-only rows)."""
    return "def available():\n    import torch\n    return torch.__version__\n" + ("" if timed else "TIMED = False\n")


def write_plugins(root: Path, kernel: str, impls: dict[str, str], adapter: str) -> None:
    """kernels/<kernel>/{spec.py, <backend>.py...} and backends/<backend>.py under root."""
    (root / "kernels" / kernel).mkdir(parents=True)
    (root / "backends").mkdir()
    (root / "kernels" / kernel / "spec.py").write_text(PROBE_SPEC)
    for name, code in impls.items():
        (root / "kernels" / kernel / f"{name}.py").write_text(code)
        (root / "backends" / f"{name}.py").write_text(adapter)


def probe_matrix(root: Path, name: str, backends: list[str], workloads: list[str], timeout_s: float,
                 rep_ms: float) -> Path:
    """root/m.toml: the probe kernel (write_plugins) on this host's CPU through the host toolchain."""
    path = root / "m.toml"
    path.write_text(textwrap.dedent(f"""
        name = "{name}"
        backends = {backends!r}
        [run]
        timeout_s = {timeout_s}
        rep_ms = {rep_ms}
        kernels_dir = "kernels"
        backends_dir = "backends"
        [[device]]
        id = "cpu"
        vendor = "cpu"
        arch = "auto"
        [[toolchain]]
        name = "host"
        system = true
        [[kernel]]
        name = "probe"
        workloads = {{ cpu = {workloads!r} }}
        dtypes = {{ cpu = ["float32"] }}
        """).replace("'", '"'))
    return path
