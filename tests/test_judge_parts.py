"""The parts the judge stands on, each alone: an arena of shared memory a worker maps (a memfd, handed over a
channel to a real second process), the channel's refusal of anything but JSON from a worker, the tensors' layouts in
an arena, and the worker's tripwire."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from opmatrix.incell import arena, channel, tamper

CHILD = textwrap.dedent("""
    import os, sys
    from opmatrix.incell import arena
    from opmatrix.incell.channel import WorkerEnd
    end = WorkerEnd(int(sys.argv[1]))
    request, fds = end.receive()
    memory = arena.open_handed(request["arena"], fds)
    x = arena.view(memory, request["x"])
    out = arena.view(memory, request["out"])
    out.copy_(x * 2)  # the worker computes in the judge's buffers
    end.send({"event": "done", "sum": float(x.sum())})
""")


def test_an_arena_is_shared_with_a_worker_process_through_the_channel():
    x, out = torch.randn(5, 7).t(), torch.empty(7, 5)  # a transposed input keeps its layout
    (x_at, out_at), size = arena.plan([x, out])
    assert x_at.stride == (1, 7) and out_at.offset % arena.ALIGN == 0 and size >= 2 * 35 * 4
    memory = arena.Arena(size, "cpu")
    memory.view(x_at).copy_(x)
    judge_end, worker_end = channel.pair()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(worker_end.fileno())], pass_fds=(worker_end.fileno(),),
                             env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    worker_end.close()
    end = channel.JudgeEnd(judge_end)
    description, fds = memory.handover()
    end.send({"arena": description, "x": x_at, "out": out_at}, fds)
    reply = end.receive(60)
    assert child.wait(60) == 0
    assert reply == {"event": "done", "sum": pytest.approx(float(x.sum()), rel=1e-5)}
    assert torch.equal(memory.view(out_at), x * 2)  # what the worker wrote, read from the judge's own mapping
    memory.close()
    end.close()


def test_a_layout_the_judge_cannot_reproduce_gets_a_compact_copy():
    assert arena.dense_stride(torch.empty(4, 1).expand(4, 6)) == (6, 1)  # an expanded view: its own elements
    assert arena.dense_stride(torch.empty(6, 8)[:, :4]) == (4, 1)  # a slice with gaps
    assert arena.dense_stride(torch.empty(2, 3, 4).permute(2, 0, 1)) == (1, 12, 4)  # a permutation is kept


def test_the_judge_reads_only_json_objects_from_a_worker():
    judge_end, worker_end = channel.pair()
    end = channel.JudgeEnd(judge_end)
    worker_end.send(b"\x80\x04pickled")  # what a pickle looks like: refused, never unpickled
    with pytest.raises(channel.ChannelClosed, match="not JSON"):
        end.receive(5)
    worker_end.send(b"[1, 2]")
    with pytest.raises(channel.ChannelClosed, match="not a JSON object"):
        end.receive(5)
    worker_end.sendall(b"x" * (channel.MAX_MESSAGE + 10))
    with pytest.raises(channel.ChannelClosed, match="longer than"):
        end.receive(5)
    assert end.receive(0.01) is None  # nothing more: a timeout, not an error
    worker_end.close()
    with pytest.raises(channel.ChannelClosed, match="closed"):
        end.receive(5)
    end.close()


def test_the_tripwire_names_a_replaced_clock_a_changed_thread_count_and_a_pinned_variable(monkeypatch):
    watch = tamper.Watch({"OPMATRIX_TEST_PIN": "1"})
    assert watch.changed() == ""
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    assert "time.perf_counter replaced" in watch.changed()
    monkeypatch.undo()
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(threads + 1)
        assert f"torch.get_num_threads() {threads} -> {threads + 1}" in watch.changed()
    finally:
        torch.set_num_threads(threads)
    monkeypatch.setenv("OPMATRIX_TEST_PIN", "2")
    assert "environment OPMATRIX_TEST_PIN" in watch.changed()
    assert "sets OPMATRIX_TEST_PIN" in watch.check_environment({"OPMATRIX_TEST_PIN": "4", "CACHE": "x"}, "it")
    assert watch.check_environment({"CACHE": "x"}, "it") == ""


def test_the_tripwire_names_a_trace_hook_and_a_replaced_event_method(monkeypatch):
    watch = tamper.Watch()
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 0.0)
    assert "torch.cuda.streams.Event.elapsed_time replaced" in watch.changed()
    monkeypatch.undo()
    previous = sys.gettrace()
    sys.settrace(lambda *a: None)
    try:
        assert "sys.gettrace()" in watch.changed()
    finally:
        sys.settrace(previous)
    assert watch.changed() == ""


def test_a_socket_pair_is_one_message_per_packet():
    judge_end, worker_end = channel.pair()
    assert judge_end.type == socket.SOCK_SEQPACKET
    judge_end.close()
    worker_end.close()
