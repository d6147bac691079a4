"""The parts the judge stands on, each alone: an arena of shared memory a worker maps (a memfd, handed over a
channel to a real second process), the channel's refusal of anything but JSON from a worker, the tensors' layouts in
an arena, the worker's tripwire, and the kinds of inputs the judge draws (a spec's INPUT_KINDS)."""
from __future__ import annotations

import os
import re
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


# -- input kinds: what the judge draws --------------------------------------------------------------------------------

KINDS_SPEC = '''
INPUT_KINDS = ("normal", "outliers", "specials")
NONFINITE_KINDS = ("specials",)
WORKLOADS = {"quick": {"n": 64}}
ASKED = []  # the workloads make_inputs was handed

def describe(w): return f"n={w['n']}"
def flops(w): return float(w["n"])
def min_bytes(w, dtype): return 8.0 * w["n"]
def tolerance(dtype): return 1e-6

def make_inputs(w, dtype, device, seed):
    import torch
    ASKED.append(dict(w))
    x = torch.randn(w["n"], generator=torch.Generator().manual_seed(seed))
    kind = w.get("inputs", "normal")
    if kind == "outliers":
        x[:2] *= 1e4
    elif kind == "specials":
        x[:3] = torch.tensor([float("inf"), float("-inf"), float("nan")])
    return (x,)

def make_output(w, dtype, device):
    import torch
    return torch.empty(w['n'])

def reference(inputs, w):
    return inputs[0].double() * 2
'''


def _kinds_judge(tmp_path, spec_text: str = KINDS_SPEC, **settings):
    from opmatrix.core.jobs import DeviceInfo, Settings
    from opmatrix.incell import plugins
    from opmatrix.incell.judge import Judge
    from tests.helpers import plugin_root

    plugin_root(tmp_path, {}, spec=spec_text)
    spec = plugins.load_spec(tmp_path / "kernels", "probe")
    device = DeviceInfo("cpu", "cpu", "x86_64")
    return spec, Judge(spec, dict(spec.WORKLOADS["quick"]), "float32", device, Settings(**settings), workers=2)


class _Seat:
    """A seat's bookkeeping without a worker: every call answers its reference (what an honest kernel writes)."""

    def __init__(self, judge) -> None:
        from opmatrix.incell import correctness

        self.verdict = correctness.Verdict(judge.tolerance, judge.atol, judge.rtol)
        self.kinds_checked: set[str] = set()
        self.bursts: list[list[str]] = []

    def run(self, contents, calls, warm, checked, timeout_s, verdict, first=False, sets=None, alone=None):
        self.bursts.append(contents.kinds[:calls])
        for index in checked:
            reference = contents.reference(index)
            verdict.add(reference.float(), reference, contents.finite[index], contents.kinds[index])
            self.kinds_checked.add(contents.kinds[index])
        return [1.0] * (calls - warm)


def test_make_inputs_is_told_the_kind_in_the_workload_and_the_judge_tries_every_kind_first(tmp_path):
    spec, judge = _kinds_judge(tmp_path)
    assert judge.kinds.names == ("normal", "outliers", "specials") and judge.kinds.nonfinite == {"specials"}
    # before any contestant: one set of every kind, each reference checked (the specials' may be non-finite)
    assert [w["inputs"] for w in spec.ASKED] == ["normal", "outliers", "specials"]
    assert all(w["n"] == 64 for w in spec.ASKED) and "inputs" not in judge.workload


@pytest.mark.parametrize("trials, sets", [(3, 32), (1, 32), (1, 1)])
def test_the_correctness_trials_hold_every_kind(tmp_path, trials, sets):
    """However few trials the matrix asks for, and however few sets of buffers fit (then in more bursts)."""
    _, judge = _kinds_judge(tmp_path, trials=trials, burst_sets=sets)
    seat = _Seat(judge)
    judge.first_call(seat, 10)
    judge.trials(seat, 10)
    held = [kind for burst in seat.bursts for kind in burst]
    assert set(held) == {"normal", "outliers", "specials"} and len(held) == max(trials, 3), seat.bursts
    assert all(len(burst) <= judge.slots for burst in seat.bursts)
    assert seat.verdict.passed and seat.verdict.trials == len(held)


def test_a_rounds_contents_mix_the_kinds_at_random(tmp_path):
    _, judge = _kinds_judge(tmp_path)
    drawn = judge.fresh(600).kinds
    counts = {kind: drawn.count(kind) for kind in judge.kinds.names}
    assert all(120 < n < 280 for n in counts.values()), counts  # 200 each expected; far outside 6 sigma otherwise
    assert judge.fresh(600).kinds != drawn  # drawn afresh, not a fixed pattern


@pytest.mark.parametrize("changes, found", [
    # a kind the spec does not declare non-finite whose reference is: the spec's fault, naming the kind
    ({'NONFINITE_KINDS = ("specials",)': "NONFINITE_KINDS = ()"},
     "non-finite values for make_inputs' inputs of kind 'specials'"),
    # a kind whose inputs have another shape than the others'
    ({"x[:2] *= 1e4": "x = x[:-1]"},
     "make_inputs gives inputs of kind 'outliers' another form than those of kind 'normal'"),
    # a reference beyond the output dtype's range (2 x 4e4 in float16): a correct kernel could not write it
    ({"x[:2] *= 1e4": "x[:2] = 4e4", "torch.empty(w['n'])": "torch.empty(w['n'], dtype=torch.float16)"},
     "reference() reaches 80000 for make_inputs' inputs of kind 'outliers', beyond the largest finite value of the "
     "output's dtype (65504)"),
])
def test_a_kind_the_spec_cannot_make_is_the_specs_fault_before_any_contestant(tmp_path, changes, found):
    from opmatrix.incell.contents import SpecFault

    text = KINDS_SPEC
    for old, new in changes.items():
        assert old in text
        text = text.replace(old, new)
    with pytest.raises(SpecFault, match=re.escape(found)):
        _kinds_judge(tmp_path, text)


@pytest.mark.parametrize("declared, found", [
    ('INPUT_KINDS = ()', "INPUT_KINDS must be a tuple of distinct kind names (at least one), got ()"),
    ('INPUT_KINDS = "normal"', "INPUT_KINDS must be a tuple"),
    ('INPUT_KINDS = ("normal", "normal")', "INPUT_KINDS must be a tuple of distinct kind names"),
    ('INPUT_KINDS = ("normal",)\nNONFINITE_KINDS = ("specials",)',
     "NONFINITE_KINDS names 'specials', which INPUT_KINDS (normal) does not declare"),
    ('WORKLOADS = {"x": {"n": 4, "inputs": 2}}', "workload 'x' has a parameter 'inputs'"),
])
def test_malformed_kinds_are_refused_naming_the_spec(declared, found):
    import types

    from opmatrix.incell.contents import InputKinds, input_kinds
    from opmatrix.incell.contract import PluginError

    assert input_kinds(types.SimpleNamespace(WORKLOADS={"x": {"n": 1}})) == InputKinds(("normal",), frozenset())
    spec = types.SimpleNamespace(__file__="kernels/x/spec.py", WORKLOADS={"x": {"n": 1}})
    exec(declared, vars(spec))
    with pytest.raises(PluginError, match=re.escape(f"kernels/x/spec.py: {found}")):
        input_kinds(spec)
