"""Child processes that cannot outlive their parent, and time limits that take a whole process group down.

Every process opmatrix starts for a cell (nox, the cell runner, each worker) asks the kernel to kill it when its
parent dies (Linux `PR_SET_PDEATHSIG`), so a SIGKILL of `opmatrix run` leaves no cell runner or worker behind.
Workers run in their own process group so that a timeout also ends the compilers they started. Stdlib only.
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1
TAIL_CHARS = 4000


def die_with_parent(parent_pid: int | None = None) -> None:
    """Ask the kernel to SIGKILL this process when its parent exits. Called in the child (before exec, or at
    start). If the parent is already gone (re-parented), exit now. A no-op where prctl does not exist."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)


def _child_setup(parent_pid: int, new_group: bool):
    def setup() -> None:
        if new_group:
            os.setpgid(0, 0)
        die_with_parent(parent_pid)
    return setup


def popen(args: list[str], *, new_group: bool = False, **kwargs) -> subprocess.Popen:
    """subprocess.Popen whose child dies with this process (and, with new_group, leads its own process group)."""
    return subprocess.Popen(args, preexec_fn=_child_setup(os.getpid(), new_group), **kwargs)


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def wait_limited(proc, timeout_s: float) -> int | None:
    """Wait for a process that leads its own group (a Popen, or a fork server's child): its exit code, or None
    when it ran past the time limit and its whole group was killed. Ctrl-C or any other exception takes the group
    down before propagating."""
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        return None
    except BaseException:
        kill_group(proc)
        raise


def run_limited(args: list[str], env: dict, log: Path, timeout_s: float) -> tuple[int | None, float]:
    """Run with a time limit in its own process group, output to `log`; (exit code or None if timed out,
    seconds). Ctrl-C or any other exception takes the child's whole group down before propagating."""
    start = time.perf_counter()
    with open(log, "wb") as out:
        proc = popen(args, new_group=True, env=env, stdout=out, stderr=subprocess.STDOUT)
        return wait_limited(proc, timeout_s), time.perf_counter() - start


def tail(path: Path, chars: int = TAIL_CHARS) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-chars:].decode("utf-8", "replace")


def signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"
