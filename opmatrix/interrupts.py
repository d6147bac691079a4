"""Ctrl-C and SIGTERM as an exception the run unwinds through, raised only where Python code can take it.

A Python signal handler runs in the main thread between bytecodes, and also inside a C extension that checks for
signals while it blocks: Ray's `ray.wait` does, through its own callback, and an exception raised there comes out
as `SystemError: CoreWorker.wait returned a result with an exception set` instead of the interrupt (or not at all
while the wait has no time limit). So code that blocks in such a library runs under `deferred()`: the handler
records the signal and returns, and the code calls `check()` at its own safe points, at least every few tenths of a
second. Everywhere else (the local scheduler reading a cell's output) the handler raises at once.
"""
from __future__ import annotations

import contextlib
import signal

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(Exception):
    """The run was stopped by a signal; `code` is the exit status a shell expects (128 + signal number)."""

    def __init__(self, signum: int) -> None:
        self.signal = signal.Signals(signum).name
        self.code = 128 + signum
        super().__init__(f"interrupted by {self.signal}")


class _State:
    deferring = 0  # how many deferred() blocks are open
    pending: int | None = None  # the first signal that came while deferring, not raised yet


def _handler(signum, frame):
    if _State.deferring:
        if _State.pending is None:
            _State.pending = signum
        return
    raise Interrupted(signum)


@contextlib.contextmanager
def as_interrupts():
    """SIGINT and SIGTERM raise Interrupted in the main thread (at once, or at the next check() while deferred),
    so the run unwinds through its finally blocks. The previous handlers come back afterwards."""
    previous = {s: signal.signal(s, _handler) for s in SIGNALS}
    _State.deferring, _State.pending = 0, None
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _State.deferring, _State.pending = 0, None


@contextlib.contextmanager
def deferred():
    """Inside: a signal is recorded, not raised; check() raises it."""
    _State.deferring += 1
    try:
        yield
    finally:
        _State.deferring = max(0, _State.deferring - 1)


def check() -> None:
    """Raise Interrupted for a signal that came while deferred."""
    if _State.pending is not None:
        signum, _State.pending = _State.pending, None
        raise Interrupted(signum)


@contextlib.contextmanager
def handlers_kept():
    """Put back the SIGINT / SIGTERM handlers a library replaced inside the block (`ray.init` installs its own
    SIGTERM handler, which would end the run without a report)."""
    kept = {s: signal.getsignal(s) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in kept.items():
            if h is not None and signal.getsignal(s) is not h:
                signal.signal(s, h)
