"""Misbehaving kernels and backends inside one normal matrix, beside healthy ones, run as a user runs it
(`opmatrix run M --no-ray`): the probe kernel on this host's CPU through the host's torch (`system = true`).

One cell holds every CPU kernel fault next to the healthy baseline (`torch`) and a healthy contestant (`good`); a
second cell of the same run uses a toolchain whose package cannot be installed. Each fault must end as its own
row with the right status and phase and an error that says what happened; the healthy rows of the same cell must
be intact; every row must be on disk; and `--resume` must find nothing left to do.

The run takes most of this suite's time (each worker imports torch; the cell probes its facts and ceilings), so it
starts in the background as soon as collection is over and these tests run last (tests/faults/conftest.py).
"""
from __future__ import annotations

import shutil
import tempfile
import textwrap
from pathlib import Path
from subprocess import CompletedProcess
from typing import NamedTuple

import pytest

from opmatrix import paths
from opmatrix.incell.timed_rows import SAMPLES_KEPT
from tests.faults import plugins
from tests.faults.harness import EARLY, Background, key, left_behind, opmatrix, rows, unique_run_id

HANG_TIMEOUT_S = 10  # room for the worker to import torch and reach its first call on a loaded machine
# A run with failed rows exits 0 here; 1 where `opmatrix run --fail-on` gates on them (its default: every failure).
FAILED_ROWS_EXIT = (0, 1)
UNINSTALLABLE = "opmatrix-fault-suite-no-such-package==1.0"
FAULTY = ["torch", "good", *plugins.TORCH_FAULTS]

MATRIX = f"""
name = "faults"
backends = {FAULTY!r}
[run]
timeout_s = 60
trials = 3
warmup_ms = 0
rep_ms = 5
rounds = 10
max_rounds = 10
burst_ms = 2
burst_warmup_ms = 0
kernels_dir = "kernels"
backends_dir = "backends"
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
[[toolchain]]
name = "host"
system = true
[[toolchain]]
name = "unbuildable"
system = true
packages = ["{UNINSTALLABLE}"]
[[kernel]]
name = "faulty"
workloads = {{ cpu = ["small"] }}
dtypes = {{ cpu = ["float32"] }}
[[kernel]]
name = "stuck"
backends = ["hang"]
timeout_s = {HANG_TIMEOUT_S}
workloads = {{ cpu = ["small"] }}
dtypes = {{ cpu = ["float32"] }}
""".replace("'", '"')

# backend -> (status, phase, words the error must contain)
EXPECTED = {
    "segfault": ("crashed", "first_call", ["SIGSEGV", "first_call"]),
    "hang": ("timeout", "first_call", [f"killed after {HANG_TIMEOUT_S} s in phase first_call"]),
    "nonfinite": ("mismatch", "correctness", ["NaN = unwritten or non-finite"]),
    "partial": ("mismatch", "correctness", ["NaN = unwritten or non-finite"]),
    "wrong": ("mismatch", "correctness", ["relative error", "> tolerance"]),
    "broken": ("compile_error", "build", ["RuntimeError", "no viable overload for 'tl.dot'"]),
    "importerr": ("env_error", "load", ["backends/importerr.py:1: ModuleNotFoundError",
                                        "backend adapter failed to load", "opmatrix_fault_suite_missing_module"]),
}


class Run(NamedTuple):
    root: Path
    run_id: str
    folder: Path
    out: CompletedProcess
    by_key: dict  # (cell, backend) -> row
    leftovers: list[int]  # processes of the run alive after it ended (the killed hang's included)


class Started:
    """The module's one run, started in the background as soon as collection is over (conftest.py)."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="opmatrix-kernel-faults-"))
        impls = {"torch": plugins.HEALTHY, "good": plugins.HEALTHY, **plugins.TORCH_FAULTS}
        adapters = {name: plugins.adapter("wallclock") for name in [*impls, "hang"]}
        adapters["importerr"] = plugins.adapter("wallclock", prelude=plugins.BROKEN_ADAPTER_IMPORT)
        plugins.write_tree(self.root, {"faulty": (plugins.TORCH_SPEC, impls),
                                       "stuck": (plugins.TORCH_SPEC, {"hang": plugins.HANG})}, adapters)
        (self.root / "m.toml").write_text(textwrap.dedent(MATRIX))
        self.run_id = unique_run_id("kernels")
        self.folder = self.root / "reports" / self.run_id
        self.background = Background(["run", self.root / "m.toml", "--no-ray", "--run-id", self.run_id, "--reports",
                                      self.root / "reports"], self.root / "run")

    def result(self) -> Run:
        out = self.background.result()
        return Run(self.root, self.run_id, self.folder, out, {(r["cell"], r["backend"]): r for r in rows(self.folder)},
                   left_behind(str(paths.SCRATCH / self.run_id)))

    def stop(self) -> None:
        self.background.stop()
        shutil.rmtree(paths.SCRATCH / self.run_id, ignore_errors=True)
        shutil.rmtree(self.root, ignore_errors=True)


def start_early() -> Started:
    return Started()


@pytest.fixture(scope="module")
def run():
    """The one run every test of this module reads."""
    started = EARLY.get(__name__) or EARLY.setdefault(__name__, start_early())
    return started.result()


def test_the_run_completes_and_stores_one_row_per_planned_job(run):
    folder, out = run.folder, run.out
    assert out.returncode in FAILED_ROWS_EXIT, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    stored = rows(folder)
    keys = [key(r) for r in stored]
    assert len(keys) == len(set(keys)) == 2 * (len(FAULTY) + 1)  # two cells, every backend plus the hang
    assert (folder / "report.md").is_file()
    assert run.leftovers == [], f"processes of the run still alive: {run.leftovers}"


@pytest.mark.parametrize("backend", sorted(EXPECTED))
def test_fault_is_its_own_row_with_status_phase_and_error(run, backend, observe):
    status, phase, words = EXPECTED[backend]
    r = run.by_key.get(("cpu.host", backend))
    observe(f"{backend} ({'adapter' if backend == 'importerr' else 'kernel'})", f"{status}/{phase}",
            f"{r['status']}/{r['phase']}" if r else "no row", lost=0 if r else 1,
            left_behind=len(run.leftovers) if backend == "hang" else 0)
    assert r is not None, f"no row for {backend}"
    assert (r["status"], r["phase"]) == (status, phase), r["error"]
    for word in words:
        assert word in r["error"], r["error"]
    assert r["median_ms"] is None and r["samples_ms"] == []  # nothing of a failed row is presented as a timing


def test_non_finite_and_unwritten_outputs_have_no_error_number(run):
    by_key = run.by_key
    for backend in ("nonfinite", "partial"):
        r = by_key[("cpu.host", backend)]
        assert r["rel_err"] is None and r["trials"] == 1, r  # stopped at the first non-finite trial
    wrong = by_key[("cpu.host", "wrong")]
    assert wrong["rel_err"] > 0.1 and wrong["trials"] == 3 and wrong["tolerance"] == 5e-3


def test_compile_error_keeps_its_traceback_and_the_hang_is_killed_on_time(run):
    by_key = run.by_key
    assert "Traceback" in by_key[("cpu.host", "broken")]["error"]  # where in build it failed
    assert by_key[("cpu.host", "hang")]["duration_s"] < HANG_TIMEOUT_S + 10


def test_localised_small_errors_are_a_mismatch(run, observe):
    """1 % of the elements off by 1 %: the norm-wise error (~1e-3) is under the tolerance (5e-3), so only an
    element-wise check can catch it."""
    by_key = run.by_key
    r = by_key[("cpu.host", "localised")]
    observe("localised (1% of elements, 1% off)", "mismatch/correctness", f"{r['status']}/{r['phase']}")
    assert r["rel_err"] is not None and r["rel_err"] < 5e-3  # the norm-wise check cannot see it
    assert (r["status"], r["phase"]) == ("mismatch", "correctness"), r["error"]


def test_healthy_rows_of_the_same_cell_are_intact(run):
    by_key = run.by_key
    base, good = by_key[("cpu.host", "torch")], by_key[("cpu.host", "good")]
    for r in (base, good):
        assert (r["status"], r["phase"]) == ("ok", "done"), r["error"]
        assert r["rel_err"] == 0.0 and r["trials"] == 3 and r["error"] == ""
        assert r["pairing"] == "interleaved" and r["rounds"] >= 10 and len(r["round_ms"]) == r["rounds"]
        assert r["median_ms"] > 0 and r["reps"] >= 5 * r["rounds"]
        assert len(r["samples_ms"]) == min(r["reps"], SAMPLES_KEPT)  # a fast call's samples are capped, reps not
        assert len(r["aa_round_ms"]) == r["rounds"]  # the baseline's A/A twin ran beside it
    assert good["baseline_round_ms"] == base["round_ms"]  # timed in the same rounds as the baseline


def test_an_uninstallable_package_fails_only_its_own_cell(run, observe):
    by_key = run.by_key
    env_rows = [r for (cell, _), r in by_key.items() if cell == "cpu.unbuildable"]
    r = env_rows[0]
    observe("uninstallable package (environment)", "env_error/environment", f"{r['status']}/{r['phase']}")
    assert len(env_rows) == len(FAULTY) + 1
    assert {(r["status"], r["phase"]) for r in env_rows} == {("env_error", "environment")}
    assert "could not be built" in r["error"] and "nox.log" in r["error"]
    assert UNINSTALLABLE.split("==")[0] in r["stderr_tail"]  # pip's own words about the package
    assert by_key[("cpu.host", "torch")]["status"] == "ok"  # the other cell of the same run


def test_the_report_lists_every_failure(run):
    folder = run.folder
    report = (folder / "report.md").read_text()
    for backend, (status, _, _) in EXPECTED.items():
        assert any(backend in line and status in line for line in report.splitlines()), backend


def test_resume_of_a_complete_run_runs_nothing_and_keeps_every_row(run, observe):
    folder, run_id, root = run.folder, run.run_id, run.root
    before = (folder / "results.jsonl").read_bytes()
    out = opmatrix("run", root / "m.toml", "--no-ray", "--run-id", run_id, "--reports", root / "reports",
                   "--resume")
    after = (folder / "results.jsonl").read_bytes()
    lost = len(before.splitlines()) - len(after.splitlines())
    observe("resume of a finished run", "nothing to run", "nothing to run" if after == before else "reran jobs",
            lost=max(lost, 0))
    assert out.returncode in FAILED_ROWS_EXIT, out.stderr[-3000:]
    assert f"0 of {2 * (len(FAULTY) + 1)} jobs" in out.stdout
    assert after == before
