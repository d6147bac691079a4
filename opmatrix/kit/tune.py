"""Autotuned kernel variants: TileLang's own autotuner, run twice, so a report can say whether the choice holds.

Used from `build` in kernels/<op>/tilelang.py. `tilelang_autotune(program, space, target)` compiles every
configuration of `space` (TileLang compiles them in parallel on the host's cores), times each on the GPU with
TileLang's profiler, keeps the fastest, then tunes a second time from scratch (the autotuner's result cache is
off; its kernel cache is on, so the second pass mostly re-times). It returns the first pass's kernel and a record
for the result's config: the chosen configuration, each pass's time and best latency, and whether the second pass
chose the same configuration. Correctness of the chosen kernel is checked by the worker against fp64 like any
other build; the tuner itself only times.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import time
from typing import Callable

from opmatrix.kit import scoped_env

PASSES = 2


@contextlib.contextmanager
def _tuner_scratch():
    """The autotuner writes autotuner.log into the working directory and caches results by source hash: keep the
    log out of the checkout and make every pass really tune."""
    previous_dir = os.getcwd()
    with scoped_env.variable("TILELANG_AUTO_TUNING_DISABLE_CACHE", "1"), \
            tempfile.TemporaryDirectory(prefix="opmatrix-tune-") as scratch:
        os.chdir(scratch)
        try:
            yield
        finally:
            os.chdir(previous_dir)


def tilelang_autotune(program: Callable, space: list[dict], target: dict, warmup_ms: float = 10,
                      rep_ms: float = 50, timeout_s: float = 60, pass_configs: dict | None = None):
    """program(**config) -> PrimFunc, its keyword parameters named as the keys of each configuration;
    `pass_configs` (e.g. fast math) apply to every candidate."""
    from tilelang.autotuner import AutoTuner

    passes = []
    with _tuner_scratch():
        for _ in range(PASSES):
            start = time.perf_counter()
            result = (AutoTuner.from_kernel(program, configs=space)
                      .set_compile_args(target=target, execution_backend="tvm_ffi", pass_configs=pass_configs)
                      .set_profile_args(skip_check=True)
                      .run(warmup=warmup_ms, rep=rep_ms, timeout=timeout_s))
            passes.append((time.perf_counter() - start, result))
    (first_s, first), (second_s, second) = passes
    record = {
        "tuned": dict(first.config),
        "tuning": {
            "space": len(space),
            "seconds": [round(first_s, 1), round(second_s, 1)],
            "best_ms": [round(first.latency, 4), round(second.latency, 4)],
            "second_choice": dict(second.config),
            "stable": dict(first.config) == dict(second.config),
        },
    }
    return first.kernel, record
