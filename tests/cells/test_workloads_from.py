"""Workloads a matrix defines by their parameters, end to end: `opmatrix profile` on the CPU tiny Llama writes
reports/<run-id>/workloads.toml, and a matrix with workloads_from it (tests/workloads_matrix.py) plans them with
their file and runs them in a real cell, ok rows at the model's shapes, the run folder keeping the file it ran.
Loading, merging, checking and planning them, and every mistake as a usage error:
tests/unit/test_workloads_from.py."""
from __future__ import annotations

import pytest

from opmatrix import cli
from tests.workloads_matrix import MATRIX


@pytest.mark.integration
def test_the_tiny_llamas_profiled_shapes_plan_and_run_as_a_matrix(tmp_path, capsys):
    """`opmatrix profile` on the CPU tiny Llama, then a matrix with workloads_from its workloads.toml: `opmatrix
    plan` says where they came from, and a run (torch only, no Ray) gives ok rows at the model's shapes."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import pandas as pd

    from opmatrix.run import run
    from opmatrix.scheduling.local import LocalScheduler

    reports = tmp_path / "reports"
    assert cli.main(["profile", "opmatrix.profile.targets:llama_step", "--preset", "tiny", "--steps", "1",
                     "--reports", str(reports), "--run-id", "prof", "--json"]) == 0
    capsys.readouterr()
    kernels = "".join(f'[[kernel]]\nname = "{k}"\nworkloads = {{ cpu = ["llama_step_tiny"] }}\n'
                      f'dtypes = {{ cpu = ["float32"] }}\n' for k in ("rope", "swiglu"))
    path = tmp_path / "m.toml"
    path.write_text(MATRIX.format(top='workloads_from = "reports/prof/workloads.toml"', rmsnorm='["llama_step_tiny"]',
                                  rest=kernels))
    assert cli.main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "  rmsnorm llama_step_tiny: tokens=64 hidden=64   from reports/prof/workloads.toml" in out
    run_dir = run(path, reports_dir=reports, run_id="shapes", scratch_root=tmp_path / "scratch",
                  scheduler=LocalScheduler())
    rows = pd.read_parquet(run_dir / "results.parquet")
    got = {(r.kernel, r.variant): (r.status, r.workload, r.shape) for r in rows.itertuples()}
    assert got == {
        ("rmsnorm", "default"): ("ok", "llama_step_tiny", "tokens=64 hidden=64"),
        ("rmsnorm", "llama"): ("ok", "llama_step_tiny", "tokens=64 hidden=64"),
        ("rope", "default"): ("ok", "llama_step_tiny", "batch=2 heads=4 kv_heads=4 seq=32 head_dim=16"),
        ("swiglu", "default"): ("ok", "llama_step_tiny", "tokens=64 intermediate=172")}, rows[["error"]]
    kept = run_dir / "workloads_from-1-workloads.toml"  # the run folder holds the shapes it ran
    assert kept.read_text() == (reports / "prof" / "workloads.toml").read_text()
