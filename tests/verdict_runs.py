"""Runs whose verdict is known, made without running anything (tests/unit: test_verdicts.py, test_deployments.py,
test_gpu_tools.py): one cell's paired timed rows with true speed-ups, rounds sharing a drift factor and each burst
its own noise, and the verdict the rules give them; a stored run folder with its verdicts.json."""
import json

import numpy as np

from opmatrix.core.acceptance import Acceptance
from opmatrix.core.result import Result
from opmatrix.decide.verdicts import decide
from opmatrix.store import ResultStore, add_speedup, frame

ACCEPT = Acceptance("torch", 1.05)


def rows(contestants: dict[str, float], seed: int, rounds: int = 10, noise: float = 0.02, drift: float = 0.08,
         workloads=("w1", "w2"), status=None) -> list[Result]:
    """One cell, one kernel: the baseline and contestants with true speed-ups `contestants` (name -> x)."""
    rng = np.random.default_rng(seed)
    status = status or {}
    out = []
    for w in workloads:
        drifts = np.exp(rng.normal(0, drift, rounds))
        base = list(1.0 * drifts * np.exp(rng.normal(0, noise, rounds)))
        twin = list(1.0 * drifts * np.exp(rng.normal(0, noise, rounds)))
        times = {"torch": base}
        for name, speedup in contestants.items():
            times[name] = list(drifts / speedup * np.exp(rng.normal(0, noise, rounds)))
        for name, series in times.items():
            state = status.get((name, w), "ok")
            out.append(Result(run_id="r", cell="h200.host", device="h200", toolchain="host", kernel="k", workload=w,
                              dtype="float16", backend=name, status=state, rel_err=0.0, pairing="interleaved",
                              rounds=rounds, round_ms=series if state == "ok" else [],
                              baseline_round_ms=[] if name == "torch" else base, aa_round_ms=twin,
                              samples_ms=series, median_ms=float(np.median(series))))
    return out


def verdict_of(results, acceptance=ACCEPT):
    (v,) = decide(add_speedup(frame(results), "torch"), acceptance)
    return v


def run_folder(root, run_id, started, verdicts, toolchain="host", triton="3.6.0"):
    """root/run_id as a run stores it: one ok torch row on the h200 under `toolchain`, run.json (started and finished
    at `started`) and `verdicts` as its verdicts.json."""
    folder = root / run_id
    store = ResultStore(folder)
    store.append(Result(run_id=run_id, cell=f"h200.{toolchain}", device="h200", toolchain=toolchain, kernel="k",
                        workload="w", dtype="float16", backend="torch", status="ok", torch="2.11.0", triton=triton,
                        driver="580.159.04", runtime="cuda 13.0"))
    (folder / "run.json").write_text(json.dumps({"run_id": run_id, "started_at": started, "finished_at": started,
                                                 "baseline": "torch"}))
    (folder / "verdicts.json").write_text(json.dumps(verdicts))
    return folder
