"""The contestants that try to win by doing less work than they claim, written into a test's own folder.

Each is a backend of its own beside the honest baseline (`torch`) and an honest contestant (`honest`), in one CPU
cell, on a small gemm + relu whose fp64 reference is informative (random inputs, about half the outputs positive).
These are the reward hacks that kernel leaderboards had to close: lazy timed calls, output caches keyed by pointer
or content, a cached returned tensor, writes to the inputs, answers right on only some calls, outputs of the wrong
form, work finished by a thread after the call returned, and a patched timer.
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

def describe(w): return f"{w['M']}x{w['N']}x{w['K']}"
def flops(w): return 2.0 * w["M"] * w["N"] * w["K"]
def min_bytes(w, dtype): return 4.0 * (w["M"] * w["K"] + w["K"] * w["N"] + w["M"] * w["N"])
def tolerance(dtype): return 1e-4

def make_inputs(w, dtype, device, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(w["M"], w["K"], generator=g), torch.randn(w["K"], w["N"], generator=g)
    return a.to(device), b.to(device)

def make_output(w, dtype, device):
    import torch
    return torch.empty(w["M"], w["N"], device=device)

def reference(inputs, w):
    import torch
    return torch.relu(inputs[0].double() @ inputs[1].double())
'''

HONEST = "torch.matmul(a, b, out=out)\nout.relu_()"

# backend -> (its kernels/<op>/<backend>.py, the statuses that may catch it)
ADVERSARIES = {
    # computes for its first 8 calls (the correctness trials use 4), then returns at once
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
    # computes only when a (cheap) hash of the contents is new
    "cache-by-content": ("""
        cache = {}
        def build(w, dtype, device, variant):
            def fn(a, b, out):
                key = (float(a[0, :4].sum()), float(b[0, :4].sum()), a.data_ptr())
                if key not in cache:
                    cache[key] = torch.relu(a @ b)
                out.copy_(cache[key])
            return fn
        """, {"mismatch", "suspect"}),
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
    # zeroes an input and the output: computes nothing (a reference made after the call would be all zero)
    "writes-inputs": ("""
        def build(w, dtype, device, variant):
            def fn(a, b, out):
                a.zero_()
                out.zero_()
            return fn
        """, {"mismatch"}),
    # applies relu to its input in place, then computes: a wrong answer if the reference sees the changed input
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
        """, {"mismatch"}),
    "wrong-dtype": ("""
        RETURNS_OUTPUT = True
        def build(w, dtype, device, variant):
            return lambda a, b, out: torch.relu(a.double() @ b.double())
        """, {"mismatch"}),
    # returns at once; a thread of its own writes the output later
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
    # patches the clock every timer reads: time runs 20 times slower while it is timed
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
}


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


# GPU only: patches the event timer every GPU timer reads (do_bench's, the checked calls'): 20 times less
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
