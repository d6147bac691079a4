"""Where the project's folders are.

The built-in backend adapters and kernels are the repository's top-level kernels/ and backends/: a checkout is
itself a project (matrix/, kernels/, backends/, reports/). The wheel ships the same folders inside the package, as
opmatrix/builtin/kernels and opmatrix/builtin/backends (pyproject.toml's package-dir maps them), so BUILTIN_KERNELS /
BUILTIN_BACKENDS are the checkout's folders in a checkout and the package's once installed: decided here, once.
A project's own backends/ and kernels/ add to them or override them by name (opmatrix.incell.plugins); in a
checkout the project's folders are the built-in ones, listed once.
From a checkout (or an editable install of one) the project is the checkout: matrix/ and reports/ sit beside the
opmatrix package. From an installed opmatrix (a wheel in site-packages) the project is the
current directory, or OPMATRIX_ROOT where set: the user's own matrix/, kernels/ and backends/ (a matrix file also
finds kernels/ and backends/ at or above its own folder: opmatrix.matrix). `opmatrix run` passes its project to the
processes it starts (nox runs in the folder of its noxfile), so every level agrees on it."""
import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# a checkout: the package beside the repository's noxfile and default matrix (never true in site-packages)
CHECKOUT = PACKAGE.parent if (PACKAGE.parent / "noxfile.py").is_file() \
    and (PACKAGE.parent / "matrix" / "default.toml").is_file() else None
# where the built-in plugins are: the checkout's top level, else the installed package's builtin/ (the wheel's
# mapping of the same folders, pyproject.toml [tool.setuptools.package-dir])
BUILTIN_ROOT = CHECKOUT or PACKAGE / "builtin"
BUILTIN_KERNELS = BUILTIN_ROOT / "kernels"
BUILTIN_BACKENDS = BUILTIN_ROOT / "backends"
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


# A run id names one folder under reports/ and one under the scratch: one path component, nothing that climbs out
# (`..`, `/`, an absolute path) or hides (a leading dot). Checked wherever a run id becomes a path.
RUN_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}"


class BadRunId(Exception):
    """A run id that is not one safe path component (RUN_ID_PATTERN)."""


def check_run_id(run_id: str) -> str:
    """`run_id` itself when it is one safe path component, else BadRunId naming the rule."""
    import re

    if not isinstance(run_id, str) or not re.fullmatch(RUN_ID_PATTERN, run_id) or ".." in run_id:
        raise BadRunId(f"--run-id {run_id!r}: a run id is one folder name: 1-128 characters of letters, digits and "
                       "'.', '_', '+', '-', starting with a letter or digit, without '..' (no '/', no absolute path); "
                       "choose another")
    return run_id


def new_run_id(name: str) -> str:
    """The id of a new run when none is given: <UTC time>-<name> (a matrix run: its matrix's name; profile, validate
    and bisect: their kind and target). The one place this format is written."""
    import datetime

    return f"{datetime.datetime.now(datetime.timezone.utc):%Y%m%d-%H%M%S}-{name}"


def new_run_folder(reports: Path, run_id: str | None, kind: str, name: str, marker: str) -> Path:
    """The folder of a new `kind` run (profile, validate) of `name`, created under `reports`: `run_id`, or
    <UTC time>-<kind>-<name>. One that already holds `marker` (its main file) is not overwritten."""
    from opmatrix.core.errors import UsageError

    if run_id is not None:
        check_run_id(run_id)
    run_id = run_id or new_run_id(f"{kind}-{name}")
    folder = reports / run_id
    if (folder / marker).exists():
        raise UsageError(f"{folder}: already holds a {kind} run; choose another --run-id (or leave it out for a new "
                         "one)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{folder}: cannot create the run folder ({exc.strerror}); choose --reports DIR") from None
    return folder


def matrix_file(value: str) -> str:
    """The matrix file a user named: a path from the current directory, else one from the project root
    (`matrix/h200.toml` works from anywhere), else a file of the project's matrix folder (`h200.toml`, `h200`).
    Nothing found: the name as given, for the matrix loader's error that lists the project's matrix files."""
    given = Path(value).expanduser()
    candidates = [given, ROOT / given, MATRICES / given, MATRICES / f"{given}.toml"]
    found = next((c for c in candidates if c.is_file()), None)
    return str(found.resolve()) if found else value
