"""One worker process seen from the judge (the cell runner): started with its end of a channel
(opmatrix.incell.channel), asked to build and to run calls, told to finish. Every wait has a limit; a worker that
dies, hangs or reports a failure ends as a row of its own with the phase the judge had it in, never as a stall of
the cell. The judge tracks the phase itself: nothing the worker writes decides it. Stdlib only."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from opmatrix.core import status
from opmatrix.core.jobs import WorkerTask
from opmatrix.core.result import Result
from opmatrix.incell import channel
from opmatrix.incell.forkserver import ForkServer
from opmatrix.incell.integrity import process_cpu_s
from opmatrix.incell.processes import kill_group, popen, signal_name, tail

WAIT_REPORT_S = 20  # while a worker builds and checks, how often the cell says which one it is waiting on
# what a worker may say its job ended with; anything else it claims is not believed
WORKER_STATUSES = (status.NOT_INSTALLED, status.UNSUPPORTED, status.COMPILE_ERROR, status.RUNTIME_ERROR,
                   status.OOM, status.ENV_ERROR, status.MISMATCH, status.SUSPECT, status.NO_HOST)
ERROR_CHARS = 8000


class ServerGone(Exception):
    """The worker did not answer as asked: `row` is its result row (crashed, timeout, or what it reported)."""

    def __init__(self, row: Result) -> None:
        super().__init__(row.error)
        self.row = row


class Server:
    """A worker process and the judge's end of its channel."""

    def __init__(self, task: WorkerTask, folder: Path, env: dict, python: str = sys.executable,
                 forks: ForkServer | None = None) -> None:
        """Started by `forks` (a fork server of this environment) where given and alive, else as a new
        interpreter `python -m opmatrix.incell.worker`; the same worker either way."""
        self.task, self.folder = task, folder
        (folder / "task.json").write_text(task.to_json())
        judge_end, worker_end = channel.pair()
        self.log = open(folder / "worker.log", "wb")
        self.started = time.perf_counter()
        self._phase = ""
        self.phase = "load"
        self.on_wait: Callable[[float, str], None] | None = None  # told while a wait is long (build, check)
        self.limit_s: float | None = None  # the time limit a timeout names (the job's, while it builds and checks)
        argv = [str(folder / "task.json")]
        fd = worker_end.fileno()
        self.proc = forks.spawn(argv, env, self.log.fileno(), fd) if forks is not None else None
        if self.proc is None:
            self.proc = popen([python, "-m", "opmatrix.incell.worker", *argv], new_group=True,
                              env=dict(env, **{channel.CHANNEL_FD_ENV: str(fd)}), stdin=subprocess.DEVNULL,
                              stdout=self.log, stderr=subprocess.STDOUT, pass_fds=(fd,))
        worker_end.close()
        self.channel = channel.JudgeEnd(judge_end)
        self.closed = False

    def expect(self, event: str, timeout_s: float, on_wait: Callable[[float, str], None] | None = None) -> dict:
        """The worker's next message, which must be `event`; while waiting, `on_wait(seconds so far, phase)` (or the
        server's own `on_wait`) every WAIT_REPORT_S. Raises ServerGone: a failure it reported, a death, a hang, or a
        message out of turn."""
        on_wait = on_wait or self.on_wait
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            try:
                message = self.channel.receive(max(0.0, min(left, WAIT_REPORT_S) if on_wait else left))
            except channel.ChannelClosed as closed:
                raise ServerGone(self._gone(None, str(closed))) from None
            if message is not None:
                break
            if time.monotonic() >= deadline:
                raise ServerGone(self._gone(timeout_s))
            if on_wait is not None:
                on_wait(self.elapsed(), self.phase)
        if message.get("event") == "failed":
            self.kill()
            raise ServerGone(self._reported(message))
        if message.get("event") != event:
            self.kill()
            raise ServerGone(Result(status=status.RUNTIME_ERROR, phase=self.phase, error=(
                f"the worker answered {str(message.get('event'))[:80]!r} where the judge asked for {event!r}")))
        return message

    def request(self, message: dict, event: str, timeout_s: float, fds: list[int] = (),
                on_wait: Callable[[float, str], None] | None = None) -> tuple[dict, tuple[float, float]]:
        """Send `message`, wait for `event`; the reply and the judge's own (sent, received) times."""
        sent = time.perf_counter()
        self.channel.send(message, fds)
        reply = self.expect(event, timeout_s, on_wait)
        return reply, (sent, time.perf_counter())

    @property
    def phase(self) -> str:
        """Where the judge has the worker: load, build, first_call, correctness, timing. Also in the job folder's
        `phase` file, for a person (or a test) watching a run."""
        return self._phase

    @phase.setter
    def phase(self, name: str) -> None:
        if name != self._phase:
            self._phase = name
            (self.folder / "phase").write_text(name)

    def cpu_s(self) -> float | None:
        """The worker's CPU seconds so far (every thread, and its live children), as the kernel accounts them."""
        return process_cpu_s(self.proc.pid)

    def finish(self, timeout_s: float) -> None:
        """Let the worker exit."""
        self.channel.send({"op": "finish"})
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise ServerGone(self._gone(timeout_s)) from None
        self._close()

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def kill(self) -> None:
        kill_group(self.proc)
        self._close()

    def log_tail(self) -> str:
        return tail(self.folder / "worker.log")

    def _reported(self, message: dict) -> Result:
        """The row of a failure the worker reported: its status if it is one a worker may report, its text."""
        claimed, error = message.get("status"), message.get("error")
        error = error[:ERROR_CHARS] if isinstance(error, str) else ""
        if claimed not in WORKER_STATUSES:
            return Result(status=status.RUNTIME_ERROR, phase=self.phase,
                          error=f"the worker reported status {str(claimed)[:40]!r}, which a worker cannot: {error}")
        return Result(status=claimed, phase=self.phase, error=error)

    def _gone(self, timed_out_after: float | None, why: str = "") -> Result:
        if timed_out_after is not None:
            self.kill()
            return Result(status=status.TIMEOUT, phase=self.phase,
                          error=f"killed after {self.limit_s or timed_out_after:.3g} s in phase {self.phase}")
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # it closed its channel but did not exit
            self.kill()
            return Result(status=status.RUNTIME_ERROR, phase=self.phase,
                          error=f"the worker broke its channel in phase {self.phase} ({why}) and was killed")
        self._close()
        how = f"killed by {signal_name(code)}" if code < 0 else f"exited with code {code}"
        return Result(status=status.CRASHED, phase=self.phase, error=f"worker {how} in phase {self.phase}")

    def _close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.channel.close()
        self.log.close()
