"""Child processes that cannot outlive their parent, and time limits that take a whole process group down.

Every process opmatrix starts for a cell (nox, the cell runner, each worker) asks the kernel to kill it when its
parent dies (Linux `PR_SET_PDEATHSIG`), so a SIGKILL of `opmatrix run` leaves no cell runner or worker behind.
Workers run in their own process group so that a timeout also ends the compilers they started. A process that
leaves the group (`setsid`, a daemon) would outlive all that: the cell runner is a child subreaper
(`PR_SET_CHILD_SUBREAPER`), so such a process becomes its child when its parent ends, and `end_escaped` finds the
children the runner never started, kills them (and their groups) and names them for the job's row. Stdlib only.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
STARTED: set[int] = set()  # the pids popen() started in this process: its own children, never escapees
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
    proc = subprocess.Popen(args, preexec_fn=_child_setup(os.getpid(), new_group), **kwargs)
    STARTED.add(proc.pid)
    return proc


class _Reaper:
    on = False  # this process is a child subreaper (become_subreaper): end_escaped acts only then


def become_subreaper() -> bool:
    """Make this process the child subreaper of everything it starts: an orphaned descendant becomes its child
    instead of init's. Only for a process that owns all its children (the cell runner's own process): end_escaped
    kills every child it did not start through popen(). False where prctl or the option does not exist."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        _Reaper.on = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        _Reaper.on = False
    return _Reaper.on


def _children() -> dict[int, tuple[str, str]]:
    """This process's children: pid -> (state letter, command line), from /proc."""
    me, found = os.getpid(), {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            state, ppid = stat[stat.rindex(")") + 2:].split()[:2]
            if int(ppid) == me:
                cmd = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
                found[int(entry.name)] = (state, cmd.strip())
        except (OSError, ValueError):
            continue
    return found


def end_escaped(rounds: int = 20) -> list[str]:
    """Kill the children of this (subreaper) process that it did not start itself, with their process groups,
    until none is left (a killed escapee's own children come next); "pid: command line" of each that was running.
    Escapees that had already ended are only reaped. Nothing at all unless this process became a subreaper (a
    cell runner run as a function inside another program leaves that program's children alone)."""
    ended: list[str] = []
    if not _Reaper.on:
        return ended
    own_group = os.getpgid(0)
    for _ in range(rounds):
        strays = {pid: found for pid, found in _children().items() if pid not in STARTED}
        if not strays:
            break
        for pid, (state, cmd) in strays.items():
            if state != "Z":
                ended.append(f"{pid}: {cmd[:200]}")
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    group = os.getpgid(pid)
                    if group != own_group:
                        os.killpg(group, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    return ended


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
