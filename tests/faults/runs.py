"""The `opmatrix run` subprocesses of the run-level fault tests (test_run_faults.py, test_run_kill_faults.py): the
matrix is a small CPU torch kernel (tests/faults/plugins.py PLAIN_SPEC) in the host toolchain; each of its three
workloads sleeps a different time per call, so every row's shape and timings say which job made it."""
from __future__ import annotations

import subprocess
from pathlib import Path

from opmatrix import paths
from tests.faults.harness import REPO, cli_env, opmatrix_cmd, rows, wait_for

WORKLOADS = {"w0": (16, 0.5), "w1": (32, 2.0), "w2": (64, 6.0)}  # PLAIN_SPEC: name -> (n, ms slept per call)


class Run:
    """One `opmatrix run` subprocess of a matrix, its output in files (a pipe nobody reads could block it)."""

    def __init__(self, matrix: Path, reports: Path, run_id: str, *extra: str, ray: bool = False) -> None:
        """ray: on the default scheduler (an embedded local Ray), else --no-ray."""
        self.folder = reports / run_id
        self.scratch = str(paths.SCRATCH / run_id)  # unique to this run: what its processes' command lines name
        self.out_path, self.err_path = reports.parent / f"{run_id}.out", reports.parent / f"{run_id}.err"
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(opmatrix_cmd("run", matrix, *(() if ray else ("--no-ray",)), "--run-id",
                                                      run_id, "--reports", reports, *extra), stdout=out, stderr=err, cwd=REPO,
                                         env=cli_env())

    def wait(self, timeout_s: float = 120) -> int:
        return self.proc.wait(timeout=timeout_s)

    @property
    def stderr(self) -> str:
        return self.err_path.read_text()

    def first_rows(self) -> list[dict]:
        """The rows on disk once the first one has landed."""
        return wait_for(lambda: rows(self.folder), 240, "the first row in results.jsonl", self.proc)


def planned() -> set[tuple]:
    return {("cpu.host", "plain", w, "float32", "torch", "default") for w in WORKLOADS}


def check_row_is_its_own_job(row: dict) -> None:
    """The shape, work and every timing sample of a row belong to its own workload, never another job's."""
    n, ms = WORKLOADS[row["workload"]]
    if row["status"] != "ok":  # a worker that died before it reported: no numbers at all
        assert row["shape"] in ("", f"n={n}") and row["median_ms"] is None and row["samples_ms"] == [], row
        return
    assert row["shape"] == f"n={n}" and row["flops"] == n, row
    assert min(row["samples_ms"]) >= ms, (row["workload"], min(row["samples_ms"]))  # it slept its own time
    slower = [other for _, other in WORKLOADS.values() if other > ms]
    # not a slower job's: each of those sleeps longer on every call, so none of its samples is this fast (the
    # fastest sample, not the median: a loaded machine stretches sleeps, it never shortens them)
    assert min(row["samples_ms"]) < min(slower, default=3 * ms), (row["workload"], min(row["samples_ms"]))

