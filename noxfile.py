"""nox sessions: `matrix` (run a matrix file), `nightly` (an upgrade check), `tests` / `unit` (the test suite, whole
or its tests/unit lane).

    nox -s matrix                      # matrix/default.toml
    nox -s matrix -- matrix/h200.toml  # another matrix file
    nox -s nightly                     # matrix/nightly-cpu.toml: run, append to the history, judge the upgrade
    nox -s tests

Cell sessions are not here: `opmatrix run` writes a cell plan and starts nox with opmatrix/cellenv/noxfile.py,
which registers that cell's session.
"""
import hashlib
import os
import shutil
import sys
from pathlib import Path

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_venv = "yes"

# The interpreter whose packages `system = true` toolchains layer over: the one nox was started with.
HOST_PYTHON = os.environ.get("OPMATRIX_HOST_PYTHON", sys.executable)
# torch for the test environment; a CPU build is enough (the suite runs on machines without a GPU).
TEST_TORCH = os.environ.get("OPMATRIX_TEST_TORCH", "torch==2.13.0")


def _python(session: nox.Session) -> str:
    """Inside a nox environment its own python; with --no-venv (hosts without a package index) nox's own."""
    return sys.executable if isinstance(session.virtualenv, nox.virtualenv.PassthroughEnv) else "python"


def _install_project(session: nox.Session) -> None:
    """An editable install of the project into the session's environment, skipped while pyproject.toml is what it
    was installed from (an editable install follows the source by itself): a warm `nox -s matrix` starts in
    seconds. pip installs uv (a few seconds) and uv the project with its dependencies: on the busy 2-core machine
    8.5 s in all with uv's cache cold and 3.5 s warm, against 35-46 s with pip alone
    (reports/20261207-cpu-first-run/NOTES.md); pip alone where uv does not install."""
    if isinstance(session.virtualenv, nox.virtualenv.PassthroughEnv):
        return
    wanted = hashlib.sha256(Path("pyproject.toml").read_bytes()).hexdigest()
    marker = Path(session.virtualenv.location) / "opmatrix-project-installed"
    if marker.is_file() and marker.read_text() == wanted:
        session.log("opmatrix already installed (editable) from this pyproject.toml")
        return
    session.run("python", "-m", "pip", "install", "--quiet", "uv", success_codes=range(256))
    if shutil.which("uv", path=session.bin):
        session.run("uv", "pip", "install", "--python", str(Path(session.bin) / "python"), "-e", ".")
    else:
        session.install("-e", ".")
    marker.write_text(wanted)


@nox.session(venv_backend="virtualenv")
def matrix(session: nox.Session) -> None:
    """Run a matrix file and write reports/<run-id>/ (results.jsonl, results.parquet, report.md)."""
    _install_project(session)
    external = isinstance(session.virtualenv, nox.virtualenv.PassthroughEnv)
    session.run(_python(session), "-m", "opmatrix", "run", *session.posargs,
                env={"OPMATRIX_HOST_PYTHON": HOST_PYTHON}, external=external)


@nox.session(venv_backend="virtualenv")
def nightly(session: nox.Session) -> None:
    """Tonight's upgrade check: run a matrix with [[compare]] (default matrix/nightly-cpu.toml) as run
    nightly-<UTC date and time>, append it to reports/history (and redraw its trend page, trend.html), then judge it
    with `opmatrix compare`: the session fails on `breaks` (and on `risk` with `-- MATRIX --strict`).
    comparison.junit.xml and comparison.html are in the run folder."""
    import datetime

    external = isinstance(session.virtualenv, nox.virtualenv.PassthroughEnv)
    _install_project(session)
    args = list(session.posargs)
    strict = ["--strict"] if "--strict" in args else []
    matrix_file = next((a for a in args if a != "--strict"), "matrix/nightly-cpu.toml")
    run_id = f"nightly-{datetime.datetime.now(datetime.timezone.utc):%Y%m%d-%H%M%S}"
    python, env = _python(session), {"OPMATRIX_HOST_PYTHON": HOST_PYTHON}
    # a failed row is judged by compare (ok -> failed is `breaks`), not here
    session.run(python, "-m", "opmatrix", "run", matrix_file, "--run-id", run_id, env=env, external=external,
                success_codes=[0, 1])
    session.run(python, "-m", "opmatrix", "history", "append", run_id, external=external)
    session.run(python, "-m", "opmatrix", "history", "--html", external=external)  # reports/history/trend.html
    session.run(python, "-m", "opmatrix", "compare", run_id, *strict, external=external)


TEST_PACKAGES = ("-e", ".[test]", TEST_TORCH, "tilelang==0.1.15", "triton==3.9.0")


@nox.session(venv_backend="virtualenv")
def tests(session: nox.Session) -> None:
    """The whole test suite, against real torch, tilelang, triton, nox and Ray (CPU builds)."""
    session.install(*TEST_PACKAGES)
    # Every lane folder of tests/ (unit, cells, golden, faults, adversarial). Three test files at a time: most of the
    # suite waits on worker processes, nox cells and Ray, not on the CPU. A file's tests stay together (module-scoped
    # runs are shared within a file).
    session.run("python", "-m", "pytest", "-n", "3", "--dist", "loadfile", *session.posargs)


@nox.session(venv_backend="virtualenv", name="unit")
def unit(session: nox.Session) -> None:
    """The fast lane: tests/unit, pure unit tests (no worker processes, nox cells or Ray: tests/cells; no rebuild of
    every committed report: tests/golden), less its calibrations over many seeds (marked `slow`), under a minute on
    two cores."""
    session.install(*TEST_PACKAGES)
    session.run("python", "-m", "pytest", "-n", "2", "-m", "not slow", "tests/unit", *session.posargs)
