"""Workloads a matrix defines by their parameters ([workload.<kernel>.<name>], inline or from `workloads_from`
files such as the reports/<run-id>/workloads.toml `opmatrix profile` writes; tests/workloads_matrix.py): loaded,
merged, checked against the kernel's spec, planned with their parameters and their file, carried to the worker;
every mistake a usage error (exit 2) naming the file and the key. The end-to-end test, which profiles the CPU tiny
Llama and runs a matrix on its shapes: tests/cells/test_workloads_from.py."""
from __future__ import annotations

import json

import pytest

from opmatrix import cli, plan
from opmatrix.core.jobs import JobSpec, Mode, Settings, WorkerTask
from opmatrix.matrix import load_matrix
from tests.helpers import CPU
from tests.workloads_matrix import FRAGMENT, write


def test_a_fragments_workloads_are_planned_with_their_parameters_and_file(tmp_path, capsys):
    path = write(tmp_path, rest='[workload.rmsnorm.inline]\ntokens = 3\nhidden = 5\n')
    matrix = load_matrix(path)
    plan.check_plugins(matrix)
    assert matrix.workload["rmsnorm"] == {"inline": {"tokens": 3, "hidden": 5}, "prof": {"tokens": 64, "hidden": 64}}
    assert matrix.workload_origin("rmsnorm", "prof") == "prof/workloads.toml"
    assert matrix.workload_origin("rmsnorm", "inline") == "m.toml"
    jobs = plan.plan_jobs(matrix, plan.plan_cells(matrix)[0])
    assert {(j.workload, j.params) for j in jobs} == {("prof", (("tokens", 64), ("hidden", 64)))}

    assert cli.main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "  rmsnorm prof: tokens=64 hidden=64   from prof/workloads.toml\n" in out
    assert "  rmsnorm inline: tokens=3 hidden=5   from m.toml  (no [[kernel]] names it)" in out
    assert "  rope prof: batch=2 heads=4 kv_heads=4 seq=32 head_dim=16   from prof/workloads.toml  (no" in out
    assert cli.main(["plan", str(path), "--json"]) == 0
    job = json.loads(capsys.readouterr().out)[0]["jobs"][0]
    assert job["params"] == {"tokens": 64, "hidden": 64} and job["workload_from"] == "prof/workloads.toml"


def test_a_spec_workload_beside_them_plans_as_before(tmp_path):
    matrix = load_matrix(write(tmp_path, rmsnorm='["small_1024", "prof"]',
                               top='workloads_from = ["prof/workloads.toml"]'))
    plan.check_plugins(matrix)
    jobs = plan.plan_jobs(matrix, plan.plan_cells(matrix)[0])
    assert {j.workload: j.params for j in jobs} == {"small_1024": (), "prof": (("tokens", 64), ("hidden", 64))}


def test_the_parameters_reach_the_worker_through_the_plans_json():
    job = JobSpec("rmsnorm", "prof", "float32", "torch", "default", 60, params=(("tokens", 64), ("hidden", 64)))
    task = WorkerTask(job=job, mode=Mode.RUN, device=CPU, kernels_dir="k", backends_dir="b", settings=Settings(),
                      attempt="a")
    assert WorkerTask.from_json(task.to_json()).job == job and hash(job)
    assert JobSpec(**json.loads(json.dumps(vars(job)))) == job  # JSON's lists back to pairs
    assert JobSpec("rmsnorm", "small_1024", "float32", "torch", "default", 60).params == ()


def test_the_compile_cache_keys_a_defined_workload_by_its_parameters(tmp_path):
    from opmatrix.incell import compile_cache

    matrix = load_matrix(write(tmp_path))
    (cell_plan,) = plan.cell_plans(matrix, "r", tmp_path / "scratch")
    job = cell_plan.jobs[0]
    other = JobSpec(**{**vars(job), "params": (("tokens", 65), ("hidden", 64))})
    plain = JobSpec(**{**vars(job), "params": ()})
    keys = {compile_cache.key(cell_plan, j) for j in (job, other, plain)}
    assert len(keys) == 3


BAD = [  # (what the fragment / matrix says, what the error names)
    (dict(top='workloads_from = "nope/workloads.toml"'),
     ["m.toml: 1 problem(s) in the matrix file", "workloads_from = 'nope/workloads.toml': no such file",
      "opmatrix profile"]),
    (dict(top='workloads_from = ["prof/workloads.toml", "prof"]'),
     ["workloads_from[1] = 'prof':", "is not a file"]),
    (dict(fragment="[workload.rmsnorm.prof\ntokens = 1\n"),
     ["workloads_from = 'prof/workloads.toml':", "is not valid TOML"]),
    (dict(fragment="name = 'x'\n" + FRAGMENT),
     ["workloads.toml: 1 problem(s) in the workloads file (workloads_from of", "name: unknown key; a workloads file "
      "holds only [workload.<kernel>.<name>] tables"]),
    (dict(fragment="[workload.rmsnorm.Prof]\ntokens = 1\nhidden = 1\n"),
     ["workloads.toml: 1 problem(s) in the workloads file", "workload.rmsnorm.Prof: not a workload name"]),
    (dict(fragment="[workload.rmsnorm.prof]\ntokens = [64]\nhidden = 64\n"),
     ["workload.rmsnorm.prof.tokens: a parameter is an integer, a finite number, true / false or a string"]),
    (dict(fragment="[workload.rmsnrom.prof]\ntokens = 64\nhidden = 64\n"),
     ["m.toml: 2 problem(s) in the matrix file", "workload.rmsnrom (in prof/workloads.toml) = 'rmsnrom': names no "
      "kernel in", "allowed: add_rmsnorm, decode_attention, flash_attention, gemm_relu, rmsnorm, rope, swiglu",
      "kernel[0].workloads.cpu[0] = 'prof'"]),
    (dict(fragment="[workload.rmsnorm.prof]\ntokens = 64\nhiden = 64\n"),
     ["workload.rmsnorm.prof (in prof/workloads.toml): not a workload of", "rmsnorm/spec.py: its workloads take "
      "the parameters tokens, hidden; missing: hidden; unknown: hiden"]),
    (dict(fragment="[workload.rmsnorm.prof]\ntokens = '64'\nhidden = 64\n"),
     ["tokens = '64': a str, where its workloads give int"]),
    (dict(fragment="[workload.rmsnorm.prof]\ntokens = 0\nhidden = 64\n"),
     ["tokens = 0: a size, at least 1"]),
    (dict(fragment=FRAGMENT.replace("head_dim = 16", "head_dim = 15")),
     ["workload.rope.prof (in prof/workloads.toml): not a workload of", "head_dim = 15: rotate-half splits "
      "head_dim in two halves; it must be even"]),
    (dict(fragment=FRAGMENT.replace("rmsnorm.prof", "rmsnorm.small_1024"), rmsnorm='["small_1024"]'),
     ["workload.rmsnorm.small_1024 (in prof/workloads.toml):", "rmsnorm/spec.py defines a workload of that name; "
      "give this one another name"]),
    (dict(rest="[workload.rmsnorm.prof]\ntokens = 8\nhidden = 64\n"),
     ["workloads_from = 'prof/workloads.toml': defines workload.rmsnorm.prof as tokens=64 hidden=64, but m.toml "
      "defines it as tokens=8 hidden=64; rename one of them"]),
    (dict(rmsnorm='["proff"]'),
     ["kernel[0].workloads.cpu[0] = 'proff': names no workload", "or [workload.rmsnorm.<name>] of the matrix "
      "(workloads_from); allowed: llama_4096,", "small_1024, ragged_1000, prof"]),
    (dict(top="workloads_from = 3"),
     ["m.toml: 1 problem(s) in the matrix file", "workloads_from = 3: Input should be a valid list"]),
]


@pytest.mark.parametrize("given, says", BAD, ids=[str(i) for i in range(len(BAD))])
def test_a_wrong_workloads_file_or_table_is_a_usage_error_naming_file_and_key(tmp_path, capsys, given, says):
    path = write(tmp_path, **given)
    assert cli.main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    for text in says:
        assert text in err, (text, err)


def test_identical_definitions_in_two_files_merge(tmp_path):
    path = write(tmp_path, top='workloads_from = ["prof/workloads.toml", "again.toml"]')
    (tmp_path / "again.toml").write_text(FRAGMENT)
    assert load_matrix(path).workload_origin("rope", "prof") == "prof/workloads.toml"


def test_validate_finds_the_run_row_at_the_models_shape_under_a_defined_workloads_name(tmp_path):
    """A run of a profiled workload names it as the fragment does (llama_step_tiny), not as the spec: validate's
    micro speed-up at the model's shape is read from the row whose shape the spec describes alike."""
    pytest.importorskip("pandas")
    from opmatrix import paths
    from opmatrix.core.result import Result
    from opmatrix.store import ResultStore
    from opmatrix.validate import sources, swap

    folder = tmp_path / "run"
    store = ResultStore(folder)
    shape = "batch=2 heads=4 kv_heads=4 seq=32 head_dim=16"
    common = dict(run_id="run", cell="cpu.host", device="cpu", toolchain="host", vendor="cpu", kernel="rope",
                  workload="llama_step_tiny", dtype="float32", status="ok", pairing="interleaved", shape=shape)
    base = [1.0, 1.1, 0.9, 1.0, 1.05]
    store.append(Result(**common, backend="torch", variant="default", round_ms=base, aa_round_ms=base))
    store.append(Result(**common, backend="triton", variant="default", round_ms=[b / 4 for b in base],
                        baseline_round_ms=base))
    model = {"batch": 2, "heads": 4, "kv_heads": 4, "seq": 32, "head_dim": 16}
    (micro, _), = sources.micro_speedups(folder, [swap.Choice("rope", "triton")], {"rope": model}, "float32", "cpu",
                                         None, lambda k: paths.BUILTIN_KERNELS).values()
    assert micro.estimate == pytest.approx(4.0) and "llama_step_tiny float32: the model's shape" in micro.source
