"""The two worlds: everything a cell environment runs imports without the driver's packages."""
import subprocess
import sys

from opmatrix import paths

BLOCKER = '''
import importlib.abc, pkgutil, sys
BLOCKED = {"pydantic", "pandas", "ray", "rich", "scipy", "tabulate", "nox", "pyarrow", "numpy", "torch"}

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is a driver package and must not be imported in a cell")
        return None

sys.meta_path.insert(0, Block())
import opmatrix.core, opmatrix.incell, opmatrix.kit
for package in (opmatrix.core, opmatrix.incell, opmatrix.kit):
    for module in pkgutil.iter_modules(package.__path__):
        __import__(f"{package.__name__}.{module.name}")
print("imported", len([m for m in sys.modules if m.startswith("opmatrix.")]))
'''


def test_in_cell_packages_import_with_the_driver_packages_blocked():
    out = subprocess.run([sys.executable, "-c", BLOCKER], cwd=paths.ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("imported ")


def test_the_cli_and_the_run_import_scipy_only_when_they_compute_statistics():
    """scipy.stats costs a second of import: `opmatrix --help`, `plan` or a refused matrix never pay it."""
    code = ("import sys, opmatrix.cli, opmatrix.run; opmatrix.cli.parser(); "  # the parser imports every subcommand's
            "print(sorted({m.split('.')[0] for m in sys.modules}))")  # module: none may import scipy at its top
    out = subprocess.run([sys.executable, "-c", code], cwd=paths.ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "'opmatrix'" in out.stdout and "'scipy'" not in out.stdout
