"""The nox session that builds one cell's environment and runs the cell runner inside it.

opmatrix/cellenv/noxfile.py registers it when OPMATRIX_CELL_PLAN names a cell plan (written by `opmatrix run`).
One session per cell, named after the hash of the cell's matrix values, so nox's environment folder is reused only
on an exact match. Installs are recorded in a marker file: an environment whose install did not finish is completed
on the next run instead of being trusted.

`system = true` toolchains layer the cell's pins over the host interpreter's own packages (how vendor GPU images
are used). A `.pth` file adds the host interpreter's site-packages after the environment's own, which also works
when the host interpreter is itself a virtual environment (where --system-site-packages would reach past it).

A vendor's `index` that does not answer (a network that reaches only PyPI or a mirror) is left out of the install
with a warning in the cell's nox.log: pip would retry it for every package (about 8 s each, minutes for torch and
its dependencies) and then install without it; uv would stop. `installer = "uv"` resolves as pip does (the best
version on any index: `--index-strategy unsafe-best-match`, so that torch's `+cpu` build on the CPU index wins over
PyPI's) and is offered the local wheel folders pip is told of by PIP_FIND_LINKS (uv reads UV_FIND_LINKS or its
uv.toml, never pip's configuration).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import nox

from opmatrix import paths
from opmatrix.core.jobs import CellPlan, ToolchainSpec

MARKER = "opmatrix-installed.json"


def host_python() -> str:
    return os.environ.get("OPMATRIX_HOST_PYTHON") or sys.executable


def _host_site_dirs(python: str) -> list[str]:
    out = subprocess.run([python, "-c", "import json, site; print(json.dumps(site.getsitepackages()))"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def _write_if_changed(path: Path, text: str) -> None:
    """Atomically, and only when different: a cell of another run may be starting Python in this environment."""
    if path.is_file() and path.read_text() == text:
        return
    staged = path.with_name(path.name + f".{os.getpid()}.tmp")
    staged.write_text(text)
    os.replace(staged, path)


INDEX_PROBE_S = 5.0  # how long a vendor's index has to answer before an install leaves it out


def index_unreachable(url: str, timeout: float = INDEX_PROBE_S) -> str | None:
    """Why a package index cannot be reached (no such host, no route, refused, no answer in time, TLS refused), or
    None when it answers at all: any HTTP status is an answer (the host is there; pip and uv read it themselves)."""
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout).close()
    except urllib.error.HTTPError:
        return None
    except (OSError, ValueError) as exc:  # URLError, socket timeouts, TLS errors
        return str(getattr(exc, "reason", None) or exc)
    return None


def _install_args(toolchain: ToolchainSpec, vendor: str, installer: str, unreachable=index_unreachable,
                  environ: dict | None = None) -> tuple[list[str], str]:
    """The arguments of `pip install` or `uv pip install` (installer) for a cell's packages, and a warning when the
    vendor's index was left out because it does not answer (empty when none was)."""
    args, warning = list(toolchain.packages), ""
    if not args:
        return args, warning
    index = toolchain.index.get(vendor)
    why = unreachable(index) if index else None
    if index and why is None:
        args += ["--extra-index-url", index]
        if installer == "uv":  # pip's resolution: uv would take a package only from the first index with it
            args += ["--index-strategy", "unsafe-best-match"]
    elif index:
        warning = (f"the index {index} does not answer ({why}): installing without it, from the default index and "
                   "local wheels, as pip does after retrying it for each package (uv would stop); a later run that "
                   "reaches it installs again with it")
    if toolchain.find_links:
        args += ["--find-links", toolchain.find_links]
    if installer == "uv":  # pip's local wheel folders, which uv does not read from pip's settings
        for folder in (os.environ if environ is None else environ).get("PIP_FIND_LINKS", "").split():
            if folder != toolchain.find_links:
                args += ["--find-links", folder]
    return args, warning


def _purelib(session: nox.Session) -> Path:
    out = session.run("python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", silent=True)
    return Path(out.strip().splitlines()[-1])


def register(plan_file: str) -> None:
    plan = CellPlan.from_json(Path(plan_file).read_text())
    toolchain, vendor = plan.cell.toolchain, plan.cell.device.vendor
    python = host_python() if toolchain.system and not toolchain.python else toolchain.python
    # uv where it is asked for and nox finds it (opmatrix depends on it: in the interpreter that starts nox)
    installer = "uv" if toolchain.installer == "uv" and nox.virtualenv.HAS_UV else "pip"
    backend = "uv" if installer == "uv" else "virtualenv"

    def cell_session(session: nox.Session) -> None:
        session.chdir(str(paths.ROOT))  # nox starts in its noxfile's folder, inside the package
        site = _purelib(session)
        if toolchain.system:
            _write_if_changed(site / "_opmatrix_host_site.pth", "\n".join(_host_site_dirs(host_python())) + "\n")
        if toolchain.installer != installer:
            session.warn("installer = 'uv', but nox finds no uv (pip install uv, an opmatrix dependency): pip installs")
        args, warning = _install_args(toolchain, vendor, installer)
        if warning:
            session.warn(warning)
        wanted = hashlib.sha256(json.dumps(args).encode()).hexdigest()
        marker = Path(session.virtualenv.location) / MARKER
        if args and not (marker.is_file() and json.loads(marker.read_text()).get("hash") == wanted):
            session.install(*args)
            marker.write_text(json.dumps({"hash": wanted, "args": args}))
        pythonpath = [str(paths.engine_path())]
        if toolchain.system and os.environ.get("PYTHONPATH"):
            pythonpath.append(os.environ["PYTHONPATH"])  # part of what the host offers
        env = dict(toolchain.env, PYTHONPATH=os.pathsep.join(pythonpath), PYTHONUNBUFFERED="1")
        if vendor == "cpu" and "OMP_NUM_THREADS" not in env and plan.settings.cpu_threads:
            env["OMP_NUM_THREADS"] = str(plan.settings.cpu_threads)  # [run] cpu_threads: every worker of the cell
        session.run("python", "-m", "opmatrix.incell.cell_runner", plan_file, env=env)

    nox.session(name=plan.session, python=python, venv_backend=backend)(cell_session)
