"""One call of one contestant in a process of its own, for a tool that watches a whole process: Nsight Compute
(`ncu`) or compute-sanitizer (opmatrix.incell.gpu_tools starts it under the tool, after the contestant's rounds).

    python -m opmatrix.incell.one_call CALL.json
    CALL.json: {"task": WorkerTask, "purpose": "profile" | "sanitize", "seed": int, "done": path}

It loads the backend and the implementation and builds it as a worker does (opmatrix.incell.phases), makes one set
of inputs with the kernel's own spec (`make_inputs`, the spec's first input kind) and its output (`make_output`),
and copies every tensor into an allocation of its own (`torch.empty_strided`, then the tensors the spec made are
freed): two tensors never share an allocation here, as the judge's arena (opmatrix.incell.arena: every slot of a
worker in one device allocation) and a spec that slices its inputs out of one tensor would have them. Under
compute-sanitizer the process also runs with PYTORCH_NO_CUDA_MEMORY_CACHING=1 (gpu_tools sets it), so torch's
caching allocator does not pack the tensors into one segment either: each is a cudaMalloc of its own, and a read
past its end is outside any allocation, which memcheck sees.

- purpose "sanitize": the call once (the first call: a lazy compiler's build and autotuning included), then a
  synchronisation.
- purpose "profile": the call once to build and warm up, then once more between cudaProfilerStart and
  cudaProfilerStop (ncu runs with --profile-from-start off): the kernels of that one call are the profile's.

It writes `done` ({"called": true, "seconds": ...}) when the call has returned, so that the tool's output is known
to cover a whole call. Nothing here is judged: the inputs' seed is not secret, no reference is computed. The
standard library at import; torch and the plugin files arrive in main().
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from opmatrix.core.jobs import WorkerTask
from opmatrix.incell import phases, plugins
from opmatrix.incell.contents import KIND_KEY, input_kinds
from opmatrix.incell.processes import die_with_parent

PURPOSES = ("profile", "sanitize")


def own_allocation(value):
    """A tensor copied into a device allocation of its own (the same shape, strides and dtype); anything else as
    it is."""
    import torch

    if not isinstance(value, torch.Tensor):
        return value
    fresh = torch.empty_strided(tuple(value.shape), tuple(value.stride()), dtype=value.dtype, device=value.device)
    try:
        fresh.copy_(value)
    except RuntimeError:  # its elements overlap (an expanded tensor): copied dense, still an allocation of its own
        fresh = value.clone(memory_format=torch.contiguous_format)
    return fresh


def prepared(task: WorkerTask, seed: int) -> tuple:
    """(the built function, its inputs, its output), every tensor in an allocation of its own."""
    backend, _ = phases.load_backend(task, lambda env: "")
    phases.check_coverage(backend, task)
    loaded = phases.load_kernel(task, backend)
    fn = phases.build(loaded, task).fn
    spec = plugins.load_spec(Path(task.kernels_dir), task.job.kernel)
    kind = input_kinds(spec).names[0]
    workload = dict(task.workload)
    made = spec.make_inputs({**workload, KIND_KEY: kind}, task.job.dtype, task.device.torch, seed)
    out = spec.make_output(workload, task.job.dtype, task.device.torch)
    inputs = tuple(own_allocation(x) for x in made)
    out = own_allocation(out)
    del made
    _synchronize(task)
    return fn, inputs, out


def _synchronize(task: WorkerTask) -> None:
    if task.device.is_gpu:
        import torch

        torch.cuda.synchronize()


def call(purpose: str, task: WorkerTask, fn, inputs: tuple, out) -> None:
    """The call, as `purpose` has it (the module docstring). A CPU task (the tests' only way to run this without a
    GPU) makes the same calls without synchronising or a profiler range."""
    import torch

    if purpose == "profile":
        fn(*inputs, out)  # builds what a lazy backend builds on its first call, warms up
        _synchronize(task)
        if task.device.is_gpu:
            torch.cuda.profiler.start()
        fn(*inputs, out)
        _synchronize(task)
        if task.device.is_gpu:
            torch.cuda.profiler.stop()
    else:
        fn(*inputs, out)
        _synchronize(task)


def main(argv: list[str]) -> int:
    die_with_parent()
    request = json.loads(Path(argv[0]).read_text())
    purpose = request["purpose"]
    if purpose not in PURPOSES:
        print(f"one_call: purpose {purpose!r} is not one of {', '.join(PURPOSES)}", file=sys.stderr)
        return 2
    task = WorkerTask.from_json(json.dumps(request["task"]))
    import torch  # noqa: F401 (before any plugin file, as in a worker)

    fn, inputs, out = prepared(task, int(request["seed"]))
    started = time.perf_counter()
    call(purpose, task, fn, inputs, out)
    Path(request["done"]).write_text(json.dumps({"called": True, "seconds": time.perf_counter() - started}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
