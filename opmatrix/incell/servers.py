"""One worker process seen from the cell runner: started, waited on until it is ready to time (or has ended with
its row), asked for timing bursts, told to finish. Every wait has a limit; a worker that dies or hangs ends as a
row of its own with the phase it was in, never as a stall of the cell. Stdlib only."""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from opmatrix.core import status
from opmatrix.core.jobs import WorkerTask
from opmatrix.core.result import Result
from opmatrix.incell.forkserver import ForkServer
from opmatrix.incell.processes import kill_group, popen, signal_name, tail
from opmatrix.incell.timing_server import REPLY_FD_ENV


WAIT_REPORT_S = 20  # while a worker builds and checks, how often the cell says which one it is waiting on


class ServerGone(Exception):
    """The worker did not answer: `row` is its result row (crashed, timeout or runtime_error)."""

    def __init__(self, row: Result) -> None:
        super().__init__(row.error)
        self.row = row


class Server:
    """A worker started as a timing server. `ready()` is True once its build passed correctness."""

    def __init__(self, task: WorkerTask, folder: Path, env: dict, python: str = sys.executable,
                 forks: ForkServer | None = None) -> None:
        """Started by `forks` (a fork server of this environment) where given and alive, else as a new
        interpreter `python -m opmatrix.incell.worker`; the same worker either way."""
        self.task, self.folder = task, folder
        self.result_path = folder / "result.json"
        (folder / "task.json").write_text(task.to_json())
        read_fd, write_fd = os.pipe()
        self.log = open(folder / "worker.log", "wb")
        self.started = time.perf_counter()
        argv = [str(folder / "task.json"), str(self.result_path)]
        self.proc = forks.spawn(argv, env, self.log.fileno(), write_fd) if forks is not None else None
        if self.proc is None:
            self.proc = popen([python, "-m", "opmatrix.incell.worker", *argv], new_group=True,
                              env=dict(env, **{REPLY_FD_ENV: str(write_fd)}), stdin=subprocess.PIPE,
                              stdout=self.log, stderr=subprocess.STDOUT, pass_fds=(write_fd,), text=True)
        os.close(write_fd)
        self.replies = read_fd
        self.buffer = b""
        self.closed = False

    def wait_ready(self, timeout_s: float, on_wait: Callable[[float, str], None] | None = None) -> bool:
        """True: ready to time. False: the worker ended on its own (its row is in `final()`). While it builds,
        `on_wait(seconds so far, phase)` is called every WAIT_REPORT_S, so a long build or a hang is named."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            line = self._readline(min(left, WAIT_REPORT_S) if on_wait else left)
            if line is not None or on_wait is None or time.monotonic() >= deadline:
                break
            on_wait(self.elapsed(), self.phase("start"))
        if line is None:
            raise ServerGone(self._gone(timeout_s, "start"))
        if line == b"":
            self.proc.wait()
            return False
        return json.loads(line).get("event") == "ready"

    def burst(self, warmup_ms: float, rep_ms: float, timeout_s: float) -> dict:
        self._send({"op": "burst", "warmup_ms": warmup_ms, "rep_ms": rep_ms})
        line = self._readline(timeout_s)
        if not line:
            raise ServerGone(self._gone(timeout_s if line is None else None, "timing"))
        reply = json.loads(line)
        if "error" in reply:
            self.kill()
            failed = reply.get("status", status.RUNTIME_ERROR)  # oom when the device ran out of memory
            raise ServerGone(Result(status=failed, phase="timing", error=reply["error"]))
        return reply

    def finish(self, timeout_s: float) -> None:
        """Let the worker write its row (extra timing views included) and exit."""
        self._send({"op": "finish"})
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise ServerGone(self._gone(timeout_s, "timing")) from None
        self._close()

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def kill(self) -> None:
        kill_group(self.proc)
        self._close()

    def log_tail(self) -> str:
        return tail(self.folder / "worker.log")

    def _send(self, message: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died: the read that follows reports how

    def _readline(self, timeout_s: float) -> bytes | None:
        """One line from the worker; b"" when it closed the channel (exited); None on timeout."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.replies], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.replies, 65536)
            if not chunk:
                return b""
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def phase(self, default: str) -> str:
        """The phase the worker last reported (its `phase` file), or `default` before it reported one."""
        path = self.folder / "phase"
        return path.read_text() if path.is_file() else default

    def _gone(self, timed_out_after: float | None, phase: str) -> Result:
        phase = self.phase(phase)
        if timed_out_after is not None:
            self.kill()
            return Result(status=status.TIMEOUT, phase=phase,
                          error=f"killed after {timed_out_after:g} s in phase {phase}")
        code = self.proc.wait()
        self._close()
        how = f"killed by {signal_name(code)}" if code < 0 else f"exited with code {code}"
        return Result(status=status.CRASHED, phase=phase, error=f"worker {how} in phase {phase}")

    def _close(self) -> None:
        if self.closed:
            return
        self.closed = True
        os.close(self.replies)
        self.log.close()
        try:
            self.proc.stdin.close()
        except OSError:
            pass
