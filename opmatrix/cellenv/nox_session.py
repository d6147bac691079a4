"""The nox session that builds one cell's environment and runs the cell runner inside it.

opmatrix/cellenv/noxfile.py registers it when OPMATRIX_CELL_PLAN names a cell plan (written by `opmatrix run`).
One session per cell, named after the hash of the cell's matrix values, so nox's environment folder is reused only
on an exact match. Installs are recorded in a marker file: an environment whose install did not finish is completed
on the next run instead of being trusted.

`system = true` toolchains layer the cell's pins over the host interpreter's own packages (how vendor GPU images
are used). A `.pth` file adds the host interpreter's site-packages after the environment's own, which also works
when the host interpreter is itself a virtual environment (where --system-site-packages would reach past it).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
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


def _install_args(toolchain: ToolchainSpec, vendor: str) -> list[str]:
    args = list(toolchain.packages)
    index = toolchain.index.get(vendor)
    if index and args:
        args += ["--extra-index-url", index]
    if toolchain.find_links and args:
        args += ["--find-links", toolchain.find_links]
    return args


def _purelib(session: nox.Session) -> Path:
    out = session.run("python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", silent=True)
    return Path(out.strip().splitlines()[-1])


def register(plan_file: str) -> None:
    plan = CellPlan.from_json(Path(plan_file).read_text())
    toolchain, vendor = plan.cell.toolchain, plan.cell.device.vendor
    python = host_python() if toolchain.system and not toolchain.python else toolchain.python
    backend = "uv" if toolchain.installer == "uv" else "virtualenv"

    def cell_session(session: nox.Session) -> None:
        session.chdir(str(paths.ROOT))  # nox starts in its noxfile's folder, inside the package
        site = _purelib(session)
        if toolchain.system:
            _write_if_changed(site / "_opmatrix_host_site.pth", "\n".join(_host_site_dirs(host_python())) + "\n")
        args = _install_args(toolchain, vendor)
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
