"""The contestants that try to win by doing less work than they claim, written into a test's own folder.

Each is a backend of its own beside the honest baseline (`torch`) and an honest contestant (`honest`), in one CPU
cell, on a small gemm + relu whose fp64 reference is informative (random inputs, about half the outputs positive),
with two kinds of inputs as the shipped specs declare them (INPUT_KINDS): N(0, 1), and outlier channels x1e4 in a.
These are the reward hacks kernel leaderboards had to close, and those that beat opmatrix's earlier judge (which lived
in the contestant's process): lazy timed calls, output caches keyed by pointer or content, a cached or lazy
returned tensor, writes to the inputs, answers right on only some calls, outputs of the wrong form, work finished by
a thread after the call returned, patched clocks, a patched reference, predicted seeds, telling a checked call
from a timed one (version counters, the NaN poison, the call stack, the first calls after a pause), more threads
than the toolchain pins, one call doing a burst's work, a thread taking the CPU from the others, and clamping its
inputs (right on N(0, 1) inputs only).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import textwrap
from pathlib import Path

GEMM_SPEC = '''
WORKLOADS = {"square_384": {"M": 384, "N": 384, "K": 384}, "square_4096": {"M": 4096, "N": 4096, "K": 4096}}
INPUT_KINDS = ("normal", "outliers")  # outliers: 4 of a's columns (the activations' channels) x 1e4

def describe(w): return f"{w['M']}x{w['N']}x{w['K']}"
def flops(w): return 2.0 * w["M"] * w["N"] * w["K"]
def min_bytes(w, dtype): return 4.0 * (w["M"] * w["K"] + w["K"] * w["N"] + w["M"] * w["N"])
def tolerance(dtype): return 1e-4

def make_inputs(w, dtype, device, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(w["M"], w["K"], generator=g), torch.randn(w["K"], w["N"], generator=g)
    if w.get("inputs") == "outliers":
        a[:, torch.randperm(w["K"], generator=g)[:4]] *= 1e4
    return a.to(device), b.to(device)

def make_output(w, dtype, device):
    import torch
    return torch.empty(w["M"], w["N"], device=device)

def reference(inputs, w):
    import torch
    return torch.relu(inputs[0].double() @ inputs[1].double())
'''

HONEST = "torch.matmul(a, b, out=out)\nout.relu_()"

# backend -> (its kernels/<op>/<backend>.py, the statuses its row may end with). "ok" is allowed only for a
# contestant the judge leaves nothing to gain from (its trick never fires, so it does all the work): the suite then
# asserts it is never adopted and is no faster than the honest copy beyond the run's noise.
ADVERSARIES = {
    # computes for its first 8 calls (the correctness trials use 3), then returns at once
    "lazy-after-8": ("""
        calls = [0]
        def build(w, dtype, device, variant):
            def fn(a, b, out):
                calls[0] += 1
                if calls[0] <= 8:
                    torch.matmul(a, b, out=out)
                    out.relu_()
            return fn
        """, {"mismatch"}),
    # computes only when the input pointers are new; otherwise copies the answer it remembered
    "cache-by-pointer": ("""
        cache = {}
        def build(w, dtype, device, variant):
            def fn(a, b, out):
                key = (a.data_ptr(), b.data_ptr())
                if key not in cache:
                    cache[key] = torch.relu(a @ b)
                out.copy_(cache[key])
            return fn
        """, {"mismatch"}),
    # computes only when a (cheap) hash of the contents is new: contents never repeat, so it always computes
    "cache-by-content": ("""
        cache = {}
        def build(w, dtype, device, variant):
            def fn(a, b, out):
                key = (float(a[0, :4].sum()), float(b[0, :4].sum()))
                if key not in cache:
                    cache[key] = torch.relu(a @ b)
                out.copy_(cache[key])
            return fn
        """, {"mismatch", "suspect", "ok"}),
    # returns the tensor it computed on its first call, forever
    "returns-cached": ("""
        RETURNS_OUTPUT = True
        kept = []
        def build(w, dtype, device, variant):
            def fn(a, b, out):
                if not kept or kept[0][0] != a.data_ptr():
                    kept[:] = [(a.data_ptr(), torch.relu(a @ b))]
                return kept[0][1]
            return fn
        """, {"mismatch"}),
    # zeroes an input and the output: computes nothing
    "writes-inputs": ("""
        def build(w, dtype, device, variant):
            def fn(a, b, out):
                a.zero_()
                out.zero_()
            return fn
        """, {"mismatch"}),
    # applies relu to its input in place, then computes: a wrong answer, and the caller's data changed
    "relu-inputs": ("""
        def build(w, dtype, device, variant):
            def fn(a, b, out):
                a.relu_()
                torch.matmul(a, b, out=out)
                out.relu_()
            return fn
        """, {"mismatch"}),
    # right on two calls of every three (after the correctness trials)
    "right-2-of-3": ("""
        calls = [0]
        def build(w, dtype, device, variant):
            def fn(a, b, out):
                calls[0] += 1
                torch.matmul(a, b, out=out)
                out.relu_()
                if calls[0] > 4 and calls[0] % 3 == 0:
                    out.mul_(1.5)
            return fn
        """, {"mismatch"}),
    "wrong-shape": ("""
        RETURNS_OUTPUT = True
        def build(w, dtype, device, variant):
            return lambda a, b, out: torch.relu(a @ b)[:-1]
        """, {"mismatch", "suspect"}),
    "wrong-dtype": ("""
        RETURNS_OUTPUT = True
        def build(w, dtype, device, variant):
            return lambda a, b, out: torch.relu(a.double() @ b.double())
        """, {"mismatch", "suspect"}),
    # returns at once; a thread of its own writes the output later, on the other core
    "thread-later": ("""
        import threading
        calls = [0]
        def work(a, b, out):
            out.copy_(torch.relu(a @ b))
        def build(w, dtype, device, variant):
            def fn(a, b, out):
                calls[0] += 1
                thread = threading.Thread(target=work, args=(a, b, out))
                thread.start()
                if calls[0] <= 4:  # waits for its thread while correctness is checked, not afterwards
                    thread.join()
            return fn
        """, {"mismatch", "suspect"}),
    # patches the clock every timer reads: time runs 20 times slower
    "patched-timer": ("""
        import time
        real = time.perf_counter
        def slow():
            return real() / 20
        def build(w, dtype, device, variant):
            time.perf_counter = slow
            def fn(a, b, out):
                torch.matmul(a, b, out=out)
                out.relu_()
            return fn
        """, {"suspect"}),
    # a clock running at 0.6x from the moment it was built, otherwise torch's own code
    "slow-clock": ("""
        import time
        real = time.perf_counter
        def build(w, dtype, device, variant):
            start = real()
            time.perf_counter = lambda: start + 0.6 * (real() - start)
            def fn(a, b, out):
                torch.matmul(a, b, out=out)
                out.relu_()
            return fn
        """, {"suspect"}),
    # makes the spec's reference compute what the kernel computes (55 % of the reduction), then does just that
    "reference-patch": ("""
        from opmatrix.kit import load_spec
        spec = load_spec(__file__)
        def partial(inputs, w):
            a, b = inputs
            k = int(0.55 * a.shape[1])
            return torch.relu(a[:, :k].double() @ b[:k].double())
        def build(w, dtype, device, variant):
            spec.reference = partial
            def fn(a, b, out):
                k = int(0.55 * a.shape[1])
                torch.matmul(a[:, :k], b[:k], out=out)
                out.relu_()
            return fn
        """, {"mismatch"}),
    # precomputes the answers for the seeds a judge could derive from public constants (the matrix seed plus a
    # fixed offset, counters), serves them by content, and writes 1.0 for any other input
    "seed-prediction": ("""
        from opmatrix.kit import load_spec
        spec = load_spec(__file__)
        answers = {}
        def build(w, dtype, device, variant):
            for seed in [*range(0, 64), *range(1000, 1064), *range(2000, 2064)]:
                a, b = spec.make_inputs(w, dtype, device.torch, seed)
                answers[float(a[0, 0])] = torch.relu(a @ b)
            def fn(a, b, out):
                known = answers.get(float(a[0, 0]))
                if known is None:
                    out.fill_(1.0)
                else:
                    out.copy_(known)
            return fn
        """, {"mismatch"}),
    # does the work only when its inputs' version counters moved since its last call (a judge writing new contents
    # into them in place, as a checked call), else 55 % of it
    "version-counter": ("""
        seen = {}
        def build(w, dtype, device, variant):
            def fn(a, b, out):
                key = a.data_ptr()
                full = seen.get(key) != a._version
                seen[key] = a._version
                k = a.shape[1] if full else int(0.55 * a.shape[1])
                torch.matmul(a[:, :k], b[:k], out=out)
                out.relu_()
            return fn
        """, {"mismatch"}),
    # does the work only when its output holds the judge's NaN poison, else 55 % of it: every output is poisoned
    # before every call, so it always does the work
    "nan-poison": ("""
        def build(w, dtype, device, variant):
            def fn(a, b, out):
                k = a.shape[1] if bool(out[0, 0].isnan()) else int(0.55 * a.shape[1])
                torch.matmul(a[:, :k], b[:k], out=out)
                out.relu_()
            return fn
        """, {"mismatch", "ok"}),
    # does the work only when a caller's frame is named like a check, else 55 % of it
    "call-stack": ("""
        import sys
        def checked():
            frame = sys._getframe(2)
            while frame is not None:
                if "check" in frame.f_code.co_name or "verify" in frame.f_code.co_name:
                    return True
                frame = frame.f_back
            return False
        def build(w, dtype, device, variant):
            def fn(a, b, out):
                k = a.shape[1] if checked() else int(0.55 * a.shape[1])
                torch.matmul(a[:, :k], b[:k], out=out)
                out.relu_()
            return fn
        """, {"mismatch"}),
    # a clock running at 0.6x, and the worker's tripwire told to see nothing: the judge's own clock catches it
    "slow-clock-unseen": ("""
        import time
        from opmatrix.incell import tamper
        real = time.perf_counter
        def build(w, dtype, device, variant):
            start = real()
            time.perf_counter = lambda: start + 0.6 * (real() - start)
            tamper.Watch.changed = lambda self: ""
            def fn(a, b, out):
                torch.matmul(a, b, out=out)
                out.relu_()
            return fn
        """, {"suspect"}),
    # a second thread where the toolchain pins one, and the tripwire told to see nothing: the CPU the kernel
    # accounts to it during its bursts catches it
    "more-threads-unseen": ("""
        from opmatrix.incell import tamper
        def build(w, dtype, device, variant):
            torch.set_num_threads(2)
            tamper.Watch.changed = lambda self: ""
            def fn(a, b, out):
                torch.matmul(a, b, out=out)
                out.relu_()
            return fn
        """, {"suspect"}),
    # takes a second thread where the toolchain pins one
    "more-threads": ("""
        def build(w, dtype, device, variant):
            torch.set_num_threads(2)
            def fn(a, b, out):
                torch.matmul(a, b, out=out)
                out.relu_()
            return fn
        """, {"suspect"}),
    # returns a tensor subclass that computes its rows only when they are read
    "lazy-subclass": ("""
        RETURNS_OUTPUT = True
        class Lazy(torch.Tensor):
            pass
        def build(w, dtype, device, variant):
            def fn(a, b, out):
                half = a.shape[0] // 2
                result = torch.empty_like(out)
                result[:half] = torch.relu(a[:half] @ b)
                lazy = result.as_subclass(Lazy)
                lazy._rest = (a[half:], b, half)
                return lazy
            return fn
        """, {"suspect"}),
    # returns a fresh tensor without writing it, hoping for memory the reference left behind
    "empty-result": ("""
        RETURNS_OUTPUT = True
        def build(w, dtype, device, variant):
            return lambda a, b, out: torch.empty_like(out)
        """, {"mismatch"}),
    # the first call of a burst finds every call's buffers (the timing loop's list, up its caller's frames) and
    # computes them all at once; the others return at once
    "batch-and-skip": ("""
        import sys
        done = set()
        def pending_calls():
            frame = sys._getframe(1)
            while frame is not None:
                calls = frame.f_locals.get("calls")
                if isinstance(calls, list) and calls and isinstance(calls[0], tuple):
                    return calls
                frame = frame.f_back
            return []
        def build(w, dtype, device, variant):
            def fn(a, b, out):
                if out.data_ptr() in done:
                    done.discard(out.data_ptr())
                    return
                for inputs, target in pending_calls():
                    x, y = inputs
                    torch.matmul(x, y, out=target)
                    target.relu_()
                    done.add(target.data_ptr())
                done.discard(out.data_ptr())
            return fn
        """, {"suspect", "mismatch"}),
    # full work on the first calls after a pause (a warm-up, or a check, as some judges make them), half after
    "first-calls-of-burst": ("""
        import time
        last = [0.0]
        run = [0]
        def build(w, dtype, device, variant):
            def fn(a, b, out):
                run[0] = 0 if time.monotonic() - last[0] > 0.001 else run[0] + 1
                k = a.shape[1] if run[0] < 2 else a.shape[1] // 2
                torch.matmul(a[:, :k], b[:k], out=out)
                out.relu_()
                last[0] = time.monotonic()
            return fn
        """, {"mismatch"}),
    # clamps its inputs to [-100, 100] (a guard against overflow, or the range of a narrower type): right on N(0, 1)
    # inputs, wrong on the outlier channels the spec declares (the correctness trials hold every kind)
    "clamps-inputs": ("""
        def build(w, dtype, device, variant):
            def fn(a, b, out):
                torch.matmul(a.clamp(-100, 100), b.clamp(-100, 100), out=out)
                out.relu_()
            return fn
        """, {"mismatch"}),
    # computes for its first 8 calls (the correctness trials), then clamps: the timed calls it is checked on hold
    # either kind, drawn in secret
    "clamps-after-8": ("""
        calls = [0]
        def build(w, dtype, device, variant):
            def fn(a, b, out):
                calls[0] += 1
                if calls[0] > 8:
                    a, b = a.clamp(-100, 100), b.clamp(-100, 100)
                torch.matmul(a, b, out=out)
                out.relu_()
            return fn
        """, {"mismatch"}),
    # a thread started at build that burns a core for ever: while the others are timed it takes their time
    "burns-cpu-while-idle": ("""
        import threading
        def spin():
            x = 0
            while True:
                x += 1
        def build(w, dtype, device, variant):
            threading.Thread(target=spin, daemon=True).start()
            def fn(a, b, out):
                torch.matmul(a, b, out=out)
                out.relu_()
            return fn
        """, {"suspect"}),
}


# With [run] builds = 2: each build's worker keeps the answers it computed in a file keyed by the inputs' contents,
# and serves the other's from there: the contestants of a round get the same contents, so one build computes and the
# other reads
SHARES_ANSWERS = ("""
    import hashlib
    from pathlib import Path
    store = Path(__file__).with_name("answers")
    store.mkdir(exist_ok=True)
    def key(a, b):
        return hashlib.sha1(a[:2].numpy().tobytes() + b[:2].numpy().tobytes()).hexdigest()
    def build(w, dtype, device, variant):
        def fn(a, b, out):
            path = store / key(a, b)
            if path.is_file():
                out.copy_(torch.load(path))
                return
            torch.matmul(a, b, out=out)
            out.relu_()
            torch.save(out.clone(), path)
        return fn
    """, {"suspect"})


# GPU only: launches its work on a stream of its own and returns without waiting (the timer's events, recorded on
# the current stream, see nothing of it)
SIDE_STREAM = ("""
    side = []
    def build(w, dtype, device, variant):
        def fn(a, b, out):
            if not side:
                side.append(torch.cuda.Stream())
            side[0].wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side[0]):
                torch.matmul(a, b, out=out)
                out.relu_()
        return fn
    """, {"mismatch", "suspect"})


# GPU only: patches the event timer every GPU timer reads: 20 times less
PATCHED_EVENTS = ("""
    def build(w, dtype, device, variant):
        real = torch.cuda.Event.elapsed_time
        torch.cuda.Event.elapsed_time = lambda start, end: real(start, end) / 20
        def fn(a, b, out):
            torch.matmul(a, b, out=out)
            out.relu_()
        return fn
    """, {"suspect"})


def impl(body: str) -> str:
    return "import torch\n" + textwrap.dedent(body).strip() + "\n"


def honest() -> str:
    return impl("def build(w, dtype, device, variant):\n    def fn(a, b, out):\n"
                + textwrap.indent(HONEST, " " * 8) + "\n    return fn")


ADAPTER = '''
TIMED = True

def available():
    return "adversarial-suite"
'''


def write_tree(root: Path, adversaries: dict = ADVERSARIES) -> list[str]:
    """root/kernels/gemm_relu/{spec.py, <backend>.py...} and root/backends/<backend>.py; the backends, baseline
    first."""
    folder = root / "kernels" / "gemm_relu"
    folder.mkdir(parents=True)
    (root / "backends").mkdir()
    (folder / "spec.py").write_text(GEMM_SPEC)
    impls = {"torch": honest(), "honest": honest(), **{b: impl(code) for b, (code, _) in adversaries.items()}}
    for backend, code in impls.items():
        (folder / f"{backend.replace('-', '_')}.py").write_text(code)
        (root / "backends" / f"{backend.replace('-', '_')}.py").write_text(ADAPTER)
    return list(impls)


@contextlib.contextmanager
def matrix_run(matrix: str, adversaries: dict, name: str, timeout: float):
    """Write the tree and `matrix` (formatted with the backends) into a folder of its own, run it as a user runs
    a matrix (`opmatrix run M --no-ray`), and yield (the finished process, rows by backend, verdicts.json's
    verdicts); everything it wrote is removed afterwards."""
    from opmatrix import paths
    from tests.faults.harness import opmatrix, rows, unique_run_id

    root = Path(tempfile.mkdtemp(prefix=f"opmatrix-{name}-"))
    backends = write_tree(root, adversaries)
    (root / "m.toml").write_text(textwrap.dedent(matrix.format(backends=json.dumps(backends))))
    run_id = unique_run_id(name)
    try:
        out = opmatrix("run", root / "m.toml", "--no-ray", "--run-id", run_id, "--reports", root / "reports",
                       timeout=timeout)
        folder = root / "reports" / run_id
        verdicts = folder / "verdicts.json"
        yield out, {r["backend"]: r for r in rows(folder)}, json.loads(verdicts.read_text()) if verdicts.is_file() else []
    finally:
        keep = os.environ.get("OPMATRIX_KEEP_REPORTS")  # a folder to copy the run into (a GPU run to commit)
        if keep and (root / "reports" / run_id).is_dir():
            shutil.copytree(root / "reports" / run_id, Path(keep) / run_id, dirs_exist_ok=True)
        shutil.rmtree(paths.SCRATCH / run_id, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
