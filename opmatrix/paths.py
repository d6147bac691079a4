"""Where the project's folders are.

The built-in backend adapters and kernels ship inside the package (opmatrix/builtin/backends, .../kernels); a
project's own backends/ and kernels/ add to them or override them by name (opmatrix.incell.plugins).
From a checkout (or an editable install of one) the project is the checkout: matrix/ and reports/ sit beside the
opmatrix package. From an installed opmatrix (a wheel in site-packages) the project is the
current directory, or OPMATRIX_ROOT where set: the user's own matrix/, kernels/ and backends/ (a matrix file also
finds kernels/ and backends/ at or above its own folder: opmatrix.matrix). `opmatrix run` passes its project to the
processes it starts (nox runs in the folder of its noxfile), so every level agrees on it."""
import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
BUILTIN_KERNELS = PACKAGE / "builtin" / "kernels"
BUILTIN_BACKENDS = PACKAGE / "builtin" / "backends"
# a checkout: the package beside the repository's noxfile and default matrix (never true in site-packages)
CHECKOUT = PACKAGE.parent if (PACKAGE.parent / "noxfile.py").is_file() \
    and (PACKAGE.parent / "matrix" / "default.toml").is_file() else None
ROOT_ENV = "OPMATRIX_ROOT"
ROOT = CHECKOUT or Path(os.environ.get(ROOT_ENV) or Path.cwd()).resolve()
KERNELS = ROOT / "kernels"
BACKENDS = ROOT / "backends"
MATRICES = ROOT / "matrix"
REPORTS = ROOT / "reports"
DEFAULT_MATRIX = MATRICES / "default.toml"
CELL_NOXFILE = PACKAGE / "cellenv" / "noxfile.py"  # the cell sessions `opmatrix run` starts (it ships in the package)
SCRATCH = ROOT / ".opmatrix"  # per-run scratch: isolated compiler caches, job files (git-ignored)


def engine_path() -> Path:
    """A folder to put on a cell's PYTHONPATH so that `import opmatrix` finds this engine and nothing else: the
    checkout, or, for an installed opmatrix, a folder holding only a link to the package (the driver's
    site-packages would bring its own torch into every cell)."""
    if CHECKOUT:
        return CHECKOUT
    folder = SCRATCH / "engine"
    link = folder / PACKAGE.name
    if not link.exists():
        folder.mkdir(parents=True, exist_ok=True)
        try:
            link.symlink_to(PACKAGE, target_is_directory=True)
        except FileExistsError:  # another run made it first
            pass
    return folder
