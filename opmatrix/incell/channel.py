"""The channel between the judge (the cell runner) and one worker: a Unix SEQPACKET socket pair, one message per
packet, file descriptors attached (SCM_RIGHTS) where a message hands shared memory over.

The two directions are not alike, because the two ends do not trust each other alike:
- judge -> worker: a pickled dict. The worker trusts the judge, and what the judge hands over (CUDA IPC handles,
  the non-tensor inputs of a call) is not all JSON.
- worker -> judge: JSON text only, at most MAX_MESSAGE bytes. The judge never unpickles, evaluates or imports
  anything a worker sends; every field it reads is checked where it is read.
Stdlib only.
"""
from __future__ import annotations

import array
import json
import os
import pickle
import select
import socket

MAX_MESSAGE = 1 << 20  # one packet; a worker's message longer than this is refused as malformed
MAX_FDS = 16
WORKER_FD = 3  # where a worker forked by the fork server finds its end of the channel
CHANNEL_FD_ENV = "OPMATRIX_CHANNEL_FD"  # names the descriptor of a worker's end


class ChannelClosed(Exception):
    """The other end closed the channel (it exited) or sent something that is not a message."""


def pair() -> tuple[socket.socket, socket.socket]:
    """(the judge's end, the worker's end)."""
    judge, worker = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    for end in (judge, worker):
        end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 2 * MAX_MESSAGE)
        end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2 * MAX_MESSAGE)
    return judge, worker


def _send(sock: socket.socket, data: bytes, fds: list[int]) -> None:
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sock.sendmsg([data], ancillary)


def _receive(sock: socket.socket, timeout_s: float | None) -> tuple[bytes, list[int]] | None:
    """(data, fds); None on timeout. Raises ChannelClosed when the other end is gone."""
    ready, _, _ = select.select([sock], [], [], timeout_s)
    if not ready:
        return None
    fds = array.array("i")
    try:
        data, ancillary, flags, _ = sock.recvmsg(MAX_MESSAGE, socket.CMSG_SPACE(MAX_FDS * fds.itemsize))
    except (ConnectionResetError, OSError) as exc:
        raise ChannelClosed(f"the channel failed: {exc}") from None
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - (len(payload) % fds.itemsize)])
    if not data:
        for fd in fds:
            os.close(fd)
        raise ChannelClosed("the other end closed the channel")
    if flags & socket.MSG_TRUNC:
        for fd in fds:
            os.close(fd)
        raise ChannelClosed(f"a message longer than {MAX_MESSAGE} bytes")
    return data, list(fds)


class JudgeEnd:
    """The judge's end: sends pickled requests, reads JSON replies."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def send(self, message: dict, fds: list[int] = ()) -> None:
        try:
            _send(self.sock, pickle.dumps(message), list(fds))
        except OSError:
            pass  # the worker is gone: the read that follows says how

    def receive(self, timeout_s: float | None) -> dict | None:
        """The worker's next message (a JSON object); None on timeout. Raises ChannelClosed."""
        got = _receive(self.sock, timeout_s)
        if got is None:
            return None
        data, fds = got
        for fd in fds:  # a worker hands the judge no descriptors
            os.close(fd)
        try:
            message = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise ChannelClosed("the worker sent a message that is not JSON") from None
        if not isinstance(message, dict):
            raise ChannelClosed("the worker sent a message that is not a JSON object")
        return message

    def close(self) -> None:
        self.sock.close()


class WorkerEnd:
    """The worker's end: reads pickled requests (with their descriptors), sends JSON."""

    def __init__(self, fd: int = WORKER_FD) -> None:
        self.sock = socket.socket(fileno=fd)

    def send(self, message: dict) -> None:
        _send(self.sock, json.dumps(message, allow_nan=False, default=str).encode(), [])

    def receive(self) -> tuple[dict, list[int]]:
        got = _receive(self.sock, None)
        data, fds = got
        return pickle.loads(data), fds
