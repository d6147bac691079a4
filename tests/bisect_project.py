"""Helpers of the `opmatrix bisect` tests (test_bisect.py, test_bisect_toolchains.py, in tests/unit and
tests/cells): a local package index of hand-written wheels fakeblas 1.0 ... 1.7, where FIRST_BAD (1.5) doubles the
time of the kernel's call, a project whose matrix installs fakeblas from that index, the same matrix over a
rollout's three named toolchains (FLEET), and the bisect command line run against it."""
import base64
import hashlib
import io
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

from opmatrix import paths

VERSIONS = [f"1.{i}" for i in range(8)]
FIRST_BAD = "1.5"
CALL_S = 0.002  # one call of the kernel sleeps this long; from FIRST_BAD on, SLOWER times as long
SLOWER = 2.0  # far beyond a busy CI host's noise floor: 1.3 once read as same under three workers on 2 cores

FAKEBLAS = '''
import time
__version__ = "{version}"
SLOWER = {slower}

def scale(x, out):
    """out = 2 x, in a fixed time (a sleep: steady on a busy machine, unlike arithmetic)."""
    time.sleep({call_s} * SLOWER)
    out.copy_(x * 2)
'''
SPEC = '''
WORKLOADS = {"n256": {"n": 256}}
def describe(w): return f"n={w['n']}"
def flops(w): return float(w["n"])
def min_bytes(w, dtype): return 8.0 * w["n"]
def tolerance(dtype): return 1e-6
def make_inputs(w, dtype, device, seed):
    import torch
    return (torch.randn(w["n"], generator=torch.Generator().manual_seed(seed), dtype=getattr(torch, dtype)),)
def make_output(w, dtype, device):
    import torch
    return torch.empty(w["n"], dtype=getattr(torch, dtype))
def reference(inputs, w):
    return inputs[0].double() * 2
'''
TORCH_IMPL = f'''
import time
def build(w, dtype, device, variant):
    def fn(x, out):
        time.sleep({CALL_S})
        out.copy_(x * 2)
    return fn
'''
FB_IMPL = '''
def build(w, dtype, device, variant):
    import fakeblas
    return fakeblas.scale
'''
ADAPTERS = {"torch": "def available():\n    import torch\n    return torch.__version__\n",
            "fb": "def available():\n    import fakeblas\n    return fakeblas.__version__\n"}


def wheel(folder: Path, version: str) -> Path:
    """fakeblas-<version>-py3-none-any.whl, written by hand (a wheel is a zip with metadata and a RECORD)."""
    slower = SLOWER if tuple(map(int, version.split("."))) >= tuple(map(int, FIRST_BAD.split("."))) else 1.0
    info = f"fakeblas-{version}.dist-info"
    files = {"fakeblas/__init__.py": FAKEBLAS.format(version=version, slower=slower, call_s=CALL_S),
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: fakeblas\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: opmatrix-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = [f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
              f"{len(text.encode())}" for name, text in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = "\n".join(record) + "\n"
    path = folder / f"fakeblas-{version}-py3-none-any.whl"
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as zf:
        for name, text in files.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), text)  # same bytes every time
    # both bisect test files (run side by side) write the shared index: never rewrite a wheel in place while the
    # other side's pip may be reading it (a new one lands whole, by rename)
    if not path.is_file() or path.read_bytes() != data.getvalue():
        part = folder / f".{path.name}.{os.getpid()}.part"
        part.write_bytes(data.getvalue())
        os.replace(part, path)
    return path


def fakeblas_project(tmp_path_factory) -> tuple[Path, Path]:
    """The local index (under the checkout's scratch, so that the cell environments built from it are reused
    between test runs: their hash includes the folder) and a project using it: (project root, index). Each bisect
    test module makes it once, in its module-scoped `project` fixture."""
    index = paths.SCRATCH / "tests-bisect-fakeblas-index"
    index.mkdir(parents=True, exist_ok=True)
    for v in VERSIONS:
        wheel(index, v)
    root = tmp_path_factory.mktemp("bisect")
    (root / "kernels" / "scale").mkdir(parents=True)
    (root / "backends").mkdir()
    (root / "kernels" / "scale" / "spec.py").write_text(SPEC)
    (root / "kernels" / "scale" / "torch.py").write_text(TORCH_IMPL)
    (root / "kernels" / "scale" / "fb.py").write_text(FB_IMPL)
    for name, text in ADAPTERS.items():
        (root / "backends" / f"{name}.py").write_text(text)
    (root / "m.toml").write_text(textwrap.dedent(f"""
        name = "fakeblas"
        backends = ["torch", "fb"]
        [run]
        timeout_s = 120
        rounds = 10
        max_rounds = 10
        burst_ms = 10
        burst_warmup_ms = 1
        warmup_ms = 1
        rep_ms = 5
        kernels_dir = "kernels"
        backends_dir = "backends"
        [[device]]
        id = "cpu"
        vendor = "cpu"
        arch = "auto"
        [[toolchain]]
        name = "host"
        system = true
        packages = ["fakeblas==1.0"]
        find_links = "{index}"
        [[kernel]]
        name = "scale"
        workloads = {{ cpu = ["n256"] }}
        dtypes = {{ cpu = ["float32"] }}
        """))
    return root, index


def bisect_cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "opmatrix", "bisect", str(root / "m.toml"), "--package", "fakeblas",
                           "--reports", str(root / "reports"), *args], capture_output=True, text=True, timeout=600)


FLEET = {"stable": "1.0", "canary": "1.4", "nightly": "1.6"}  # three steps of a rollout, named toolchains


def fleet_matrix(root: Path) -> Path:
    """The project's matrix with the rollout's three toolchains in place of its one (each its own pins and an
    environment variable of its own, as a rollout step that changes more than one package would have)."""
    text = (root / "m.toml").read_text()
    head, _, tail = text.partition("[[toolchain]]")
    find_links = next(line for line in tail.splitlines() if line.strip().startswith("find_links"))
    kernel = tail[tail.index("[[kernel]]"):]
    toolchains = "".join(f'[[toolchain]]\nname = "{name}"\nsystem = true\npackages = ["fakeblas=={v}"]\n'
                         f'{find_links.strip()}\nenv = {{ ROLLOUT_STEP = "{name}" }}\n\n' for name, v in FLEET.items())
    path = root / "fleet.toml"
    path.write_text(head + toolchains + kernel)
    return path
