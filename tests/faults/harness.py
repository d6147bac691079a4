"""Running opmatrix as a user does (a subprocess of the CLI) and looking at what a run left: its rows, its
processes. Shared by the fault suite's modules."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def cli_env(**extra: str) -> dict:
    """The environment of an `opmatrix` subprocess: this checkout first on the path; pip never reaches an index
    (the uninstallable package fails at once, offline)."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PYTHONPATH=path, PIP_NO_INDEX="1", **extra)


def opmatrix_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "opmatrix", *map(str, args)]


def opmatrix(*args, timeout: float = 240, **env) -> subprocess.CompletedProcess:
    return subprocess.run(opmatrix_cmd(*args), capture_output=True, text=True, cwd=REPO, env=cli_env(**env),
                          timeout=timeout)


def unique_run_id(name: str) -> str:
    return f"faults-{name}-{uuid.uuid4().hex[:8]}"


def rows(folder: Path) -> list[dict]:
    """results.jsonl as JSON objects (the store's own validating reader is tested elsewhere; these are rows
    the run itself wrote)."""
    path = folder / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def key(row: dict) -> tuple:
    return tuple(row[k] for k in ("cell", "kernel", "workload", "dtype", "backend", "variant"))


def processes_of(marker: str) -> list[int]:
    """Processes whose command line or environment mentions `marker` (a run's unique scratch path). Used to
    assert that a run left nothing behind, never to clean up after it."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            text = (proc / "cmdline").read_bytes() + (proc / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in text:
            found.append(int(proc.name))
    return found


def left_behind(marker: str, within_s: float = 10.0) -> list[int]:
    """The run's processes still alive once the kernel has had `within_s` to deliver their parent-death signals
    (polled: returns as soon as none is left)."""
    deadline = time.monotonic() + within_s
    while True:
        alive = processes_of(marker)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def wait_for(predicate, timeout_s: float, what: str, proc: subprocess.Popen | None = None):
    """Poll until predicate() is truthy (returns it); fail naming `what` after timeout_s or if proc exits."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the run exited ({proc.returncode}) before {what}:\n{out[-2000:]}\n{err[-2000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.02)


class Background:
    """An `opmatrix` command started now and collected later (its output in files: a pipe nobody reads could
    block it). stop() ends it, through its own handle, if nobody collected it."""

    def __init__(self, args: list, logs: Path) -> None:
        self.args = args
        self.out_path, self.err_path = logs.with_suffix(".out"), logs.with_suffix(".err")
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(opmatrix_cmd(*args), stdout=out, stderr=err, cwd=REPO, env=cli_env())

    def result(self, timeout_s: float = 600) -> subprocess.CompletedProcess:
        code = self.proc.wait(timeout=timeout_s)
        return subprocess.CompletedProcess(self.args, code, self.out_path.read_text(), self.err_path.read_text())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# Runs that test modules start as soon as collection is over (module -> what its start_early() returned), so
# that they proceed while other modules' tests run. See tests/faults/conftest.py.
EARLY: dict = {}
