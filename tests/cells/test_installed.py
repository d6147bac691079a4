"""opmatrix installed as a package (no checkout around it) works on the project it is started in: `plan` and `run`
find the project's matrix/, kernels/ and backends/ beside the backend adapters and kernels the package ships, write
reports/ and .opmatrix/ there, never into site-packages, and cells import this engine through a folder that holds
only it. The built-in kernels and backends are the checkout's top-level kernels/ and backends/; installed, they are
the package's builtin/kernels and builtin/backends (pyproject.toml's package-dir). The `wheel` tests build the wheel
from the checkout's files and install it, not editable, into a fresh virtual environment (its dependencies, torch
among them, are this test environment's, on PYTHONPATH: nothing is downloaded), check that it carries every file of
the package and of both plugin folders and run a built-in kernel from it, and install plugin packages that register
through entry points beside it. `plan` from the installed copy, without a run: tests/unit/test_installed.py
(tests/installed_package.py: the copy and its project)."""
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from opmatrix import paths
from tests.installed_package import IGNORED, installed_copy

# what the wheel carries, as the checkout lays it out: the package, and the plugin folders it maps into it
CHECKOUT_FILES = ("pyproject.toml", "README.md")
CHECKOUT_FOLDERS = ("opmatrix", "kernels", "backends")


def _files(folder: Path) -> set[Path]:
    return {p.relative_to(folder) for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture
def installed(tmp_path):
    """(site, project, opmatrix): tests/installed_package.installed_copy."""
    return installed_copy(tmp_path)


@pytest.mark.integration
def test_an_installed_opmatrix_runs_the_project_through_its_own_cell_noxfile(installed):
    site, project, opmatrix = installed
    out = opmatrix("run", "matrix/mine.toml", "--no-ray", "--run-id", "r1")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert (project / "reports" / "r1" / "report.md").is_file()
    assert "| probe     | ok" in (project / "reports" / "r1" / "report.md").read_text()
    engine = project / ".opmatrix" / "engine" / "opmatrix"
    assert engine.is_symlink() and engine.resolve() == (site / "opmatrix").resolve()
    assert not list(site.rglob(".opmatrix")) and not (site / "reports").exists()  # nothing written by the package


AXPY_SPEC = """
WORKLOADS = {"tiny": {"n": 4096}}
DTYPES = ("float32",)
def describe(w): return f"n={w['n']}"
def flops(w): return 2.0 * w["n"]
def min_bytes(w, dtype): return 12.0 * w["n"]
def tolerance(dtype): return 1e-6
def make_inputs(w, dtype, device, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(w["n"], generator=g, dtype=getattr(torch, dtype)) for _ in range(2))
def make_output(w, dtype, device):
    import torch
    return torch.empty(w["n"], dtype=getattr(torch, dtype))
def reference(inputs, w):
    x, y = (t.double() for t in inputs)
    return 2 * x + y
"""
AXPY = {
    "torch.py": "import torch\nfrom opmatrix.kit import Built\ndef build(workload, dtype, device, variant):\n"
                "    return Built(lambda x, y, out: torch.add(y, x, alpha=2, out=out))\n",
    # aot_eager: dynamo traces and AOTAutograd lowers, no C++ to compile (inductor takes a minute on 2 busy cores)
    "torch_compile.py": "import torch\nfrom opmatrix.kit import Built\ndef build(workload, dtype, device, variant):\n"
                        "    fn = torch.compile(lambda x, y, out: out.copy_(2 * x + y), backend='aot_eager')\n"
                        "    return Built(fn)\n",
}
MINE = """
name = "mine"
backends = ["torch", "torch-compile"]
[run]
rounds = 10
max_rounds = 10
burst_ms = 1
burst_warmup_ms = 0
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
[[toolchain]]
name = "host"
system = true
[[kernel]]
name = "axpy"
workloads = { cpu = ["tiny"] }
dtypes = { cpu = ["float32"] }
[[kernel]]
name = "rmsnorm"                 # shipped with opmatrix
backends = ["torch"]
workloads = { cpu = ["ragged_1000"] }
dtypes = { cpu = ["float32"] }
[[exclude]]
kernel = "rmsnorm"
variant = "llama"
"""
ADAPTER = "def available():\n    import torch\n    return torch.__version__\n"


def _build_wheel(source: Path, out: Path) -> Path:
    """`pip wheel` of a source folder (setuptools from this environment: no download)."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
                    str(source)], check=True, capture_output=True, text=True, timeout=300)
    return next(out.glob("*.whl"))


def _plugin_wheel(out: Path, dist: str, module: str, backend: str) -> Path:
    """A plugin distribution's wheel, written as a wheel is (PEP 427): one backend adapter registered under the
    opmatrix.backends entry point group. Written rather than built: a setuptools build takes seconds."""
    stem = f"{dist.replace('-', '_')}-0.1"
    files = {f"{module}/__init__.py": "", f"{module}/{backend.replace('-', '_')}.py": ADAPTER,
             f"{stem}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n",
             f"{stem}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                         "Tag: py3-none-any\n",
             f"{stem}.dist-info/entry_points.txt":
                 f"[opmatrix.backends]\n{backend} = {module}.{backend.replace('-', '_')}\n"}
    def digest(text: str) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record = [f"{name},sha256={digest(text)},{len(text.encode())}" for name, text in files.items()]
    record.append(f"{stem}.dist-info/RECORD,,")
    files[f"{stem}.dist-info/RECORD"] = "\n".join(record) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return wheel


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory):
    """A fresh virtual environment with opmatrix's wheel installed (not editable), and how to run in it."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "src"
    source.mkdir()
    for name in CHECKOUT_FILES:
        shutil.copy(paths.CHECKOUT / name, source / name)
    for name in CHECKOUT_FOLDERS:
        shutil.copytree(paths.CHECKOUT / name, source / name, ignore=IGNORED)
    wheel = _build_wheel(source, root / "dist")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"

    def pip_install(*args):
        subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                        "--no-index", *map(str, args)], check=True, capture_output=True, text=True, timeout=300)
    pip_install(wheel)
    env = {k: v for k, v in os.environ.items() if k != paths.ROOT_ENV}
    env["PYTHONPATH"] = sysconfig.get_paths()["purelib"]  # the dependencies; holds no opmatrix package itself

    def opmatrix(*args, cwd):
        return subprocess.run([str(venv / "bin" / "opmatrix"), *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=400)
    return venv, python, env, pip_install, opmatrix


def _project(root: Path) -> Path:
    """A project holding only kernels/axpy/ and a matrix (no backends/ folder, no copy of anything shipped)."""
    (root / "kernels" / "axpy").mkdir(parents=True)
    (root / "kernels" / "axpy" / "spec.py").write_text(AXPY_SPEC)
    for name, code in AXPY.items():
        (root / "kernels" / "axpy" / name).write_text(code)
    (root / "matrix").mkdir()
    (root / "matrix" / "mine.toml").write_text(MINE)
    return root


@pytest.mark.integration
def test_a_wheel_installed_opmatrix_plans_and_runs_a_project_of_one_kernel_with_the_shipped_plugins(wheel_venv,
                                                                                                     tmp_path):
    venv, python, env, pip_install, opmatrix = wheel_venv
    where = subprocess.run([str(python), "-c", "import opmatrix; print(opmatrix.__file__)"], env=env, check=True,
                           cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert Path(where).is_relative_to(venv) and not list(venv.rglob("__editable__*"))  # the wheel, not this tree
    package = Path(where).parent
    # every file of the package and of the checkout's kernels/ and backends/ is in the wheel, the plugin folders
    # inside the package where opmatrix.paths looks for them once installed
    assert _files(package / "builtin" / "kernels") == _files(paths.BUILTIN_KERNELS) and _files(paths.BUILTIN_KERNELS)
    assert _files(package / "builtin" / "backends") == _files(paths.BUILTIN_BACKENDS)
    assert {p for p in _files(package) if p.parts[0] != "builtin"} == _files(paths.PACKAGE)
    assert not list(Path(where).parents[1].glob("kernels")) and not list(Path(where).parents[1].glob("backends"))
    located = subprocess.run([str(python), "-c", "from opmatrix import paths; print(paths.CHECKOUT, "
                              "paths.BUILTIN_KERNELS, paths.BUILTIN_BACKENDS)"], env=env, check=True, cwd=tmp_path,
                             capture_output=True, text=True).stdout.split()
    assert located == ["None", str(package / "builtin" / "kernels"), str(package / "builtin" / "backends")]
    project = _project(tmp_path / "project")
    out = opmatrix("plan", "matrix/mine.toml", cwd=project)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "cpu.host" in out.stdout and "3 jobs" in out.stdout
    assert f"kernel axpy: project {project / 'kernels' / 'axpy'}" in out.stdout
    out = opmatrix("run", "matrix/mine.toml", "--no-ray", "--run-id", "r1", cwd=project)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    import pandas as pd

    rows = pd.read_parquet(project / "reports" / "r1" / "results.parquet")
    assert sorted(zip(rows.kernel, rows.backend, rows.status)) == [
        ("axpy", "torch", "ok"), ("axpy", "torch-compile", "ok"), ("rmsnorm", "torch", "ok")]


@pytest.mark.integration
def test_a_plugin_package_registered_by_entry_point_is_discovered_and_a_clash_is_refused(wheel_venv, tmp_path):
    venv, python, env, pip_install, opmatrix = wheel_venv
    project = _project(tmp_path / "project")
    (project / "matrix" / "mine.toml").write_text(MINE.replace('"torch-compile"]', '"torch-compile", "acme"]'))
    pip_install(_plugin_wheel(tmp_path, "acme-opmatrix", "acme_ops", "acme"))
    out = opmatrix("plan", "matrix/mine.toml", cwd=project)
    assert out.returncode == 0, out.stdout + out.stderr
    adapter = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"]) / "acme_ops"
    assert f"backend acme: entry point acme = acme_ops.acme (acme-opmatrix 0.1) {adapter / 'acme.py'}" in out.stdout
    # a second package registering a backend the package ships: refused when a matrix names it, both named
    pip_install(_plugin_wheel(tmp_path, "rogue-torch", "rogue_torch", "torch"))
    out = opmatrix("plan", "matrix/mine.toml", cwd=project)
    assert out.returncode == 2
    assert "backends[0] = 'torch': backend 'torch' is provided 2 times" in out.stderr
    assert "entry point torch = rogue_torch.torch (rogue-torch 0.1)" in out.stderr and "shipped:" in out.stderr
    assert "put the one to use in the project's backends/torch.py" in out.stderr
    (project / "backends").mkdir()
    (project / "backends" / "torch.py").write_text(ADAPTER)  # the project's own settles it, and plan says so
    out = opmatrix("plan", "matrix/mine.toml", cwd=project)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"backend torch: project {project / 'backends' / 'torch.py'}, overriding entry point torch = " in out.stdout
