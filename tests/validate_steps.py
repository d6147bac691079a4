"""Helpers of the `opmatrix validate` tests (test_validate.py, in tests/unit and tests/cells): the tiny Llama step
(torch + transformers on the CPU, random weights), the swaps a --use text asks for from the shipped kernels (or a
project's), and a run folder as `opmatrix run` leaves it, whose verdicts choose and whose rows give the
microbenchmark speed-ups. The test modules skip without torch and transformers before importing this."""
from __future__ import annotations

import json
from pathlib import Path

from opmatrix import paths
from opmatrix.incell import plugins
from opmatrix.profile import targets
from opmatrix.validate import swap


LLAMA = "opmatrix.profile.targets:llama_step"


def swaps_for(text: str, kernels_dir: Path | None = None):
    """The swaps `--use text` asks for on the CPU, from the shipped kernels or the project's kernels_dir."""
    found = plugins.discover(paths.BUILTIN_KERNELS, paths.BUILTIN_BACKENDS, kernels_dir)
    return swap.make_swaps(swap.parse_use(text), found, swap.device_info("cpu"))


def say(line: str) -> None:
    """Where the check and the measurement print their progress: nowhere, here."""


def stored_run(folder: Path) -> Path:
    """A run folder as `opmatrix run` leaves it (results.jsonl rows timed in rounds, verdicts.json): rope on a CPU
    device, torch (baseline, with its A/A twin) and torch-compile (2x faster) on the workload small_d64."""
    from opmatrix.core.result import Result
    from opmatrix.store import VERDICTS_JSON, ResultStore

    store = ResultStore(folder)
    common = dict(run_id=folder.name, cell="cpu.host", device="cpu", toolchain="host", vendor="cpu", kernel="rope",
                  workload="small_d64", dtype="float32", status="ok", pairing="interleaved")
    base = [1.0, 1.1, 0.9, 1.0, 1.05]
    store.append(Result(**common, backend="torch", variant="default", round_ms=base,
                        aa_round_ms=[1.01, 1.09, 0.91, 0.99, 1.04]))
    store.append(Result(**common, backend="torch-compile", variant="default", round_ms=[b / 2 for b in base],
                        baseline_round_ms=base, aa_round_ms=[1.01, 1.09, 0.91, 0.99, 1.04]))
    (folder / VERDICTS_JSON).write_text(json.dumps([
        {"kernel": "rope", "device": "cpu", "toolchain": "host", "verdict": "adopt", "choice": "torch-compile",
         "candidates": [{"label": "torch-compile", "geomean": 2.0, "lo": 1.9, "hi": 2.1}]},
        {"kernel": "gemm_relu", "device": "cpu", "toolchain": "host", "verdict": "keep framework",
         "choice": "torch", "candidates": []}]))
    return folder


def tiny_llama():
    """The tiny Llama step, random weights (opmatrix.profile.targets' llama_step, preset tiny)."""
    return targets.make_step(targets.load_target(LLAMA), preset="tiny")
