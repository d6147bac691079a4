"""A fork server for a cell's workers: one process that has already imported torch forks a fresh worker per job,
and the cell's probe (facts and ceilings) before them.

Starting a worker as a new interpreter costs a torch import (about 2 s of CPU) before the job does anything; a cell
starts one per job, and one more per A/A twin. The fork server pays it once per cell (and once more for a
[[compare]]'s candidate toolchain, whose own server runs that environment's Python). Each job still gets a fresh
process of its own (forked from a server that has run no job and touched no device), its own process group, its
own stdin, log and reply channel, and the environment the cell runner gives it; a crash, hang or device error still
ends that process only. Only modules that start no thread and open no device at import are loaded in advance
(torch, and the worker's own modules); every backend and kernel module is imported in the child, as before.

Protocol, over a Unix socket in the abstract namespace (no path, no length limit), one connection per worker:
    runner -> server   JSON {"main": "worker" | "cell_probe", "argv": [...], "env": {...}} with three descriptors
                       (SCM_RIGHTS): the child's stdin, its log (stdout and stderr) and its end of the judge's
                       channel (opmatrix.incell.channel); the child runs opmatrix.incell.<main>.main(argv)
    server -> runner   {"pid": PID}, then, when the worker has exited, {"returncode": CODE} (-N: killed by signal N)
The server dies with the cell runner (parent-death signal), and every worker dies with the server. Stdlib only.

    python -m opmatrix.incell.forkserver NAME [LABEL]     # LABEL: text for `ps` (the cell's scratch folder)
"""
from __future__ import annotations

import array
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from opmatrix.incell.processes import die_with_parent, kill_group, popen
from opmatrix.incell.channel import CHANNEL_FD_ENV, WORKER_FD

READY = b"ready\n"
PRELOAD = ("torch",)
MAINS = ("worker", "cell_probe")  # the modules a forked child may run (their main(argv))
MAX_MESSAGE = 1 << 20


def send_with_fds(sock: socket.socket, data: bytes, fds: list[int]) -> None:
    sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])


def recv_with_fds(sock: socket.socket, nfds: int) -> tuple[bytes, list[int]]:
    fds = array.array("i")
    data, ancdata, _, _ = sock.recvmsg(MAX_MESSAGE, socket.CMSG_SPACE(nfds * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - (len(payload) % fds.itemsize)])
    return data, list(fds)


def returncode(wait_status: int) -> int:
    """A wait status as subprocess reports it: the exit code, or -N when killed by signal N."""
    return -os.WTERMSIG(wait_status) if os.WIFSIGNALED(wait_status) else os.WEXITSTATUS(wait_status)


def _preload() -> None:
    for module in PRELOAD:
        try:
            __import__(module)
        except Exception:  # noqa: BLE001 - a cell without torch: its workers import what they need themselves
            pass
    from opmatrix.incell import worker  # noqa: F401


def _run_worker(main: str, argv: list[str], env: dict, stdin: int, log: int, reply: int) -> None:
    """In the forked child: become the worker (or probe) process. Never returns."""
    code = 1
    try:
        os.setpgid(0, 0)  # its own process group (the server sets it too, before it reports the pid: no race)
        die_with_parent()
        os.dup2(stdin, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.dup2(reply, WORKER_FD)
        for fd in (stdin, log, reply):
            if fd > WORKER_FD:
                os.close(fd)
        os.environ.clear()
        os.environ.update(env, **{CHANNEL_FD_ENV: str(WORKER_FD)})
        sys.stdin = open(0, "r", closefd=False)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        import importlib

        code = importlib.import_module(f"opmatrix.incell.{main}").main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - reported in the worker's log, like an interpreter's traceback
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


class Server:
    def __init__(self, name: str) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind("\0" + name)
        self.listener.listen(64)
        self.children: dict[int, socket.socket] = {}
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: os.write(self.wake_w, b"."))

    def serve(self) -> None:
        sys.stdout.buffer.write(READY)
        sys.stdout.flush()
        while True:
            ready, _, _ = select.select([self.listener, self.wake_r], [], [])
            if self.wake_r in ready:
                os.read(self.wake_r, 4096)
                self._reap()
            if self.listener in ready:
                self._fork_one()

    def _fork_one(self) -> None:
        conn, _ = self.listener.accept()
        data, fds = recv_with_fds(conn, 3)
        request = json.loads(data) if len(fds) == 3 else {}
        main = request.get("main", "worker")
        if len(fds) != 3 or main not in MAINS:  # refused: a malformed request, or a module it may not run
            conn.close()
            for fd in fds:
                os.close(fd)
            return
        pid = os.fork()
        if pid == 0:
            for other in (self.listener, conn, *self.children.values()):
                other.close()
            os.close(self.wake_r)
            os.close(self.wake_w)
            _run_worker(main, request["argv"], request["env"], *fds)
        for fd in fds:
            os.close(fd)
        try:
            os.setpgid(pid, pid)  # before the runner learns the pid, so killpg(pid) always finds the group
        except (PermissionError, ProcessLookupError):
            pass  # the child did it already, or has already exited
        self.children[pid] = conn
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        self._reap()

    def _reap(self) -> None:
        while self.children:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is not None:
                try:
                    conn.sendall(json.dumps({"returncode": returncode(wait_status)}).encode() + b"\n")
                except OSError:
                    pass
                conn.close()


# ---- the cell runner's side ------------------------------------------------------------------------------------

START_TIMEOUT_S = 120


class ForkServer:
    """The cell runner's handle on its fork server; `spawn` starts a worker through it. None of its failures is a
    job's: `start` returns None when the server cannot be started, and the runner then starts workers itself."""

    def __init__(self, proc: subprocess.Popen, name: str) -> None:
        self.proc, self.name = proc, name

    @classmethod
    def start(cls, label: str, log: Path, python: str = sys.executable, env: dict | None = None) -> ForkServer | None:
        """A server in this environment, or in the one `python` and `env` name (a [[compare]]'s candidate
        toolchain: its workers are forked from a server that imported that toolchain's framework)."""
        if os.environ.get("OPMATRIX_FORKSERVER", "1") == "0" or not sys.platform.startswith("linux"):
            return None
        name = f"opmatrix-forkserver-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        with open(log, "ab") as err:
            proc = popen([python, "-m", "opmatrix.incell.forkserver", name, label], new_group=True,
                         stdout=subprocess.PIPE, stderr=err, env=env)
        ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
        if not ready or proc.stdout.readline() != READY:
            kill_group(proc)
            return None
        return cls(proc, name)

    def spawn(self, argv: list[str], env: dict, log_fd: int, reply_fd: int,
              main: str = "worker") -> ForkedProcess | None:
        """A worker (or the probe: main="cell_probe") forked by the server (stdin a new pipe, output to log_fd,
        replies to reply_fd); None when the server is gone."""
        if self.proc.poll() is not None:
            return None
        stdin_r, stdin_w = os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect("\0" + self.name)
            send_with_fds(conn, json.dumps({"main": main, "argv": argv, "env": env}).encode(),
                          [stdin_r, log_fd, reply_fd])
            child = ForkedProcess(conn, os.fdopen(stdin_w, "w"), argv)
        except (OSError, ValueError):
            conn.close()
            os.close(stdin_w)
            return None
        finally:
            os.close(stdin_r)
        return child

    def close(self) -> None:
        kill_group(self.proc)
        self.proc.stdout.close()


class ForkedProcess:
    """A forked worker seen like a subprocess.Popen (pid, stdin, poll, wait, returncode): the server, its parent,
    reports its exit."""

    def __init__(self, conn: socket.socket, stdin, args: list[str]) -> None:
        self.conn, self.stdin, self.args = conn, stdin, args
        self.returncode: int | None = None
        self.buffer = b""
        reply = self._message(START_TIMEOUT_S)
        if reply is None or "pid" not in reply:
            raise OSError("the fork server did not start the worker")
        self.pid = reply["pid"]

    def poll(self) -> int | None:
        if self.returncode is None:
            self._finished(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and not self._finished(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def _finished(self, timeout: float | None) -> bool:
        reply = self._message(timeout)
        if reply is None:
            return False
        self.returncode = reply.get("returncode", -signal.SIGKILL)
        self.conn.close()
        return True

    def _message(self, timeout: float | None) -> dict | None:
        """The next message; {} when the server closed the connection (it died: the worker died with it)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.conn], [], [], left)
            if not ready:
                return None
            chunk = self.conn.recv(65536)
            if not chunk:
                return {}
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)


def main(argv: list[str]) -> int:
    die_with_parent()
    _preload()
    Server(argv[0]).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
