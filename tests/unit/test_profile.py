"""`opmatrix profile`: a real tiny Llama step (torch + transformers on the CPU, random weights) profiled with
torch.profiler, its ops grouped by kernel, Amdahl gains, the cross-check against key_averages, the files, and
clear errors for bad targets. No mocks, no subprocesses."""
from __future__ import annotations

import argparse
import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from opmatrix.cli import UsageError  # noqa: E402
from opmatrix.commands import profile as profile_command  # noqa: E402
from opmatrix.profile import ops, profiler, targets, workloads  # noqa: E402
from opmatrix.profile.output import JSON, MARKDOWN, TRACE  # noqa: E402

LLAMA = "opmatrix.profile.targets:llama_step"
SHARE_SUM_TOLERANCE = 1e-9  # the shares are parts of one sum: they add up to 1 up to rounding


def parse(*argv):
    parser = argparse.ArgumentParser(prog="opmatrix")
    profile_command.add_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["profile", *argv])


def run_cli(*argv) -> int:
    args = parse(*argv)
    return args.func(args)


@pytest.fixture(scope="module")
def llama_run(tmp_path_factory):
    """`opmatrix profile llama_step --preset tiny`, as the command line runs it: its folder and profile.json."""
    reports = tmp_path_factory.mktemp("reports")
    assert run_cli(LLAMA, "--preset", "tiny", "--steps", "3", "--reports", str(reports), "--run-id", "tiny") == 0
    folder = reports / "tiny"
    return folder, json.loads((folder / JSON).read_text())


@pytest.fixture(scope="module")
def llama_prof():
    """The stopped profiler of three tiny Llama steps, for checks against torch.profiler's own numbers."""
    step = targets.make_step(targets.load_target(LLAMA), preset="tiny")
    return profiler.record(step, "cpu", steps=3, warmup=1)


def test_llama_groups_cover_gemm_attention_rmsnorm_rope_swiglu_and_sum_to_one(llama_run):
    _, data = llama_run
    groups = {g["group"]: g for g in data["groups"]}
    assert {ops.GEMM, ops.ATTENTION, ops.RMSNORM, ops.ROPE, ops.SWIGLU} <= set(groups)
    assert all(g["us_per_step"] > 0 for g in groups.values())
    assert math.isclose(sum(g["share"] for g in groups.values()), 1.0, abs_tol=SHARE_SUM_TOLERANCE)
    assert math.isclose(sum(g["us_per_step"] for g in groups.values()), data["us_per_step"], rel_tol=1e-9)
    assert [g["share"] for g in data["groups"]] == sorted((g["share"] for g in data["groups"]), reverse=True)
    assert all(groups[g]["in_opmatrix"] for g in (ops.GEMM, ops.ROPE, ops.SWIGLU))  # kernels/<group> exists
    assert not any(g["in_opmatrix"] for name, g in groups.items() if name in (ops.ELEMENTWISE, ops.OTHER))
    assert data["basis"] == "self CPU time" and data["steps"] == 3 and data["device"] == "cpu"
    assert 0 < data["busy"] <= 1


def test_each_op_lands_in_the_kernel_its_module_or_name_says(llama_prof):
    slices = profiler.cpu_slices(llama_prof.events())
    groups_of = {}
    for s in slices:
        groups_of.setdefault(s.name, set()).add(s.group)
    assert groups_of["aten::mm"] == {ops.GEMM}  # every projection and lm_head, also those inside LlamaMLP
    assert groups_of["aten::rsqrt"] == {ops.RMSNORM}  # LlamaRMSNorm's range
    assert groups_of["aten::neg"] == {ops.ROPE}  # rotate_half, inside apply_rotary_pos_emb's range
    assert groups_of["aten::silu"] == {ops.SWIGLU}  # LlamaMLP's range; its Linear ranges are innermost
    assert groups_of["aten::_scaled_dot_product_flash_attention_for_cpu"] == {ops.ATTENTION}  # by name
    assert groups_of["aten::embedding"] == {ops.OTHER}


def test_labelled_ranges_are_gone_after_profiling(llama_prof):
    from torch.nn.modules import module as torch_module
    from transformers.models.llama import modeling_llama

    assert not torch_module._global_forward_pre_hooks and not torch_module._global_forward_hooks
    assert not hasattr(modeling_llama.apply_rotary_pos_emb, "__opmatrix_labelled__")


def test_step_time_and_top_ops_agree_with_key_averages(llama_prof):
    profile = profiler.summarise(llama_prof, "cpu", steps=3)
    check = profile.cross_check
    assert check.agrees and check.max_rel_diff <= profiler.CROSS_CHECK_TOLERANCE
    assert check.line().startswith("agrees with key_averages within")
    # independently of the module's helpers: torch.profiler's total self CPU time of the ops, annotations left out
    reference = sum(a.self_cpu_time_total for a in llama_prof.key_averages() if not a.is_user_annotation)
    assert math.isclose(profile.us_per_step * 3, reference, rel_tol=profiler.CROSS_CHECK_TOLERANCE)
    top = profile.top_ops[0]
    averages = {a.key: a for a in llama_prof.key_averages()}
    assert math.isclose(top.us_per_step * 3, averages[top.name].self_cpu_time_total, rel_tol=1e-6)


def test_amdahl_gains_for_a_known_share():
    assert profiler.amdahl(0.5, 2) == pytest.approx(4 / 3)
    assert profiler.amdahl(0.5, math.inf) == pytest.approx(2.0)
    assert profiler.amdahl(0.0, 10) == 1.0
    gains = profiler.gains(0.2)
    assert list(gains) == ["1.1x", "1.5x", "2x", "inf"]
    assert gains["1.1x"] == pytest.approx(1 / (0.8 + 0.2 / 1.1))
    assert gains["1.5x"] == pytest.approx(1 / (0.8 + 0.2 / 1.5))
    assert gains["2x"] == pytest.approx(1 / 0.9)
    assert gains["inf"] == pytest.approx(1.25)
    assert profiler.gains(1.0)["inf"] is None  # the whole step: unbounded


def test_threshold_marks_small_groups_not_worth_a_kernel(llama_prof):
    assert profiler.verdict(ops.RMSNORM, 0.049, 0.05) == profiler.NOT_WORTH
    assert profiler.verdict(ops.RMSNORM, 0.05, 0.05) == profiler.WORTH
    assert profiler.verdict(ops.ELEMENTWISE, 0.3, 0.05) == profiler.NO_SINGLE_KERNEL
    for threshold in (0.05, 0.5):
        profile = profiler.summarise(llama_prof, "cpu", steps=3, threshold=threshold)
        for g in profile.groups:
            assert (g.verdict == profiler.NOT_WORTH) == (g.share < threshold), (g.group, g.share, threshold)
    assert sum(g.verdict != profiler.NOT_WORTH for g in profile.groups) <= 1  # at 0.5, one group at most


def test_files_exist_and_parse(llama_run):
    folder, data = llama_run
    trace = json.loads((folder / TRACE).read_text())
    names = {e.get("name") for e in trace["traceEvents"]}
    assert {"aten::mm", ops.STEP_RANGE, ops.range_name(ops.RMSNORM), ops.range_name(ops.ROPE)} <= names
    md = (folder / MARKDOWN).read_text()
    assert "| kernel group | share | ms / step | gain at 1.1x | gain at 1.5x | gain at 2x | gain at inf |" in md
    assert "agrees with key_averages within" in md and "| gemm_relu |" in md
    assert data["cross_check"]["agrees"] and data["target"] == f"{LLAMA} --preset tiny"
    assert set(data["groups"][0]["gains"]) == {"1.1x", "1.5x", "2x", "inf"}


def test_workloads_toml_holds_the_rope_rmsnorm_swiglu_shapes_the_tiny_llama_called(llama_run):
    """The tiny preset: hidden 64, 4 heads (head_dim 16), intermediate 172, batch 2 x sequence 32 (64 tokens), 2
    layers: a norm before attention and MLP per layer and a final one; one rope and one MLP per layer."""
    import tomllib

    folder, _ = llama_run
    text = (folder / workloads.FILE).read_text()
    assert tomllib.loads(text) == {"workload": {
        "rmsnorm": {"llama_step_tiny": {"tokens": 64, "hidden": 64}},
        "rope": {"llama_step_tiny": {"batch": 2, "heads": 4, "kv_heads": 4, "seq": 32, "head_dim": 16}},
        "swiglu": {"llama_step_tiny": {"tokens": 64, "intermediate": 172}}}}
    assert "# 5 call(s) in the step, float32, at transformers.models.llama.modeling_llama:LlamaRMSNorm.forward" in text
    assert "# 2 call(s) in the step, float32" in text and 'workloads_from = "' in text
    assert "- rope llama_step_tiny: batch=2 heads=4 kv_heads=4 seq=32 head_dim=16" in (folder / MARKDOWN).read_text()


def test_observing_leaves_the_models_functions_and_output_as_they_were():
    from transformers.models.llama import modeling_llama

    from opmatrix import paths
    from opmatrix.incell import plugins

    step = targets.make_step(targets.load_target(LLAMA), preset="tiny")
    before = (modeling_llama.apply_rotary_pos_emb, vars(modeling_llama.LlamaRMSNorm)["forward"],
              vars(modeling_llama.LlamaMLP)["forward"])
    found = plugins.discover(paths.BUILTIN_KERNELS, paths.BUILTIN_BACKENDS, None)
    calls = []
    observed = workloads.observe(lambda: calls.append(step()), found)
    assert [w.kernel for w in observed.workloads] == ["rmsnorm", "rope", "swiglu"] and not observed.unfit
    assert torch.equal(calls[0], step())  # the observed step computed what the unmodified one does
    assert (modeling_llama.apply_rotary_pos_emb, vars(modeling_llama.LlamaRMSNorm)["forward"],
            vars(modeling_llama.LlamaMLP)["forward"]) == before
    block = targets.make_step(targets.load_target("opmatrix.profile.targets:block_step"), preset="tiny")
    assert workloads.observe(block, found).workloads == []  # torch.nn.RMSNorm and a plain MLP: no wired site


def test_workload_names_are_matrix_names_numbered_where_a_kernel_saw_several_shapes():
    assert workloads.workload_name("llama_step", "tiny") == "llama_step_tiny"
    assert workloads.workload_name("My Model!", None) == "my_model"
    assert workloads.workload_name("_x", None) == "x" and workloads.workload_name("__", None) == "model"
    observed = workloads.Observed()
    for shape in ({"tokens": 1, "hidden": 8}, {"tokens": 4, "hidden": 8}, {"tokens": 4, "hidden": 8}):
        observed.add("rmsnorm", "site", workloads._Seen(shape, "bfloat16"))
    named = workloads.name_them(observed, "m")
    assert [(w.name, w.params["tokens"], w.calls) for w in named] == [("m_1", 4, 2), ("m_2", 1, 1)]


def test_a_script_target_is_grouped_by_op_name(tmp_path):
    script = tmp_path / "eager_attention.py"
    script.write_text("import torch\nq = torch.randn(2, 4, 16, 8)\nDEVICE = 'cpu'\n\n"
                      "def step():\n    w = torch.softmax(q @ q.transpose(-1, -2), dim=-1)\n    return w @ q\n")
    assert run_cli(str(script), "--steps", "2", "--reports", str(tmp_path), "--run-id", "s", "--json") == 0
    groups = {g["group"] for g in json.loads((tmp_path / "s" / JSON).read_text())["groups"]}
    assert {ops.GEMM, ops.ATTENTION} <= groups


def test_block_step_profiles_without_transformers_modules(tmp_path):
    step = targets.make_step(targets.load_target("opmatrix.profile.targets:block_step"), preset="tiny")
    profile = profiler.profile_step(step, "cpu", steps=2, warmup=1)
    assert {ops.GEMM, ops.ATTENTION, ops.RMSNORM, ops.SWIGLU} <= {g.group for g in profile.groups}


@pytest.mark.parametrize("argv, says", [
    (["no_such_module_xyz:step"], "cannot import module 'no_such_module_xyz'"),
    (["opmatrix.profile.targets:no_such_step"], "has no function 'no_such_step'; its targets: llama_step, block_step"),
    (["opmatrix.profile.targets"], "module:function"),
    ([LLAMA, "--preset", "huge"], "unknown preset 'huge'; presets: gpu, tiny"),
    ([LLAMA, "--preset", "tiny", "--device", "tpu"], "device 'tpu' is not one of cpu, cuda"),
    ([LLAMA, "--preset", "tiny", "--steps", "0"], "--steps 0"),
    ([LLAMA, "--preset", "tiny", "--threshold", "5"], "--threshold 5.0"),
    (["missing_script.py"], "no such script"),
])
def test_bad_input_is_a_usage_error_naming_the_target(argv, says, tmp_path):
    with pytest.raises(UsageError) as caught:
        run_cli(*argv, "--reports", str(tmp_path))
    assert says in str(caught.value)
    assert not any(tmp_path.iterdir())  # nothing written before the input is checked


def test_a_script_without_step_is_a_usage_error(tmp_path):
    script = tmp_path / "no_step.py"
    script.write_text("def forward():\n    pass\n")
    with pytest.raises(UsageError, match="defines no step"):
        targets.load_target(str(script))
    with pytest.raises(UsageError, match="--preset applies to module:function"):
        targets.make_step(targets.load_target(str(_write_step(tmp_path))), preset="tiny")


def _write_step(tmp_path):
    script = tmp_path / "ok_step.py"
    script.write_text("def step():\n    return 1\n")
    return script


@pytest.mark.skipif(torch.cuda.is_available(), reason="this host has a CUDA device")
def test_a_device_this_host_lacks_is_a_usage_error():
    with pytest.raises(UsageError, match="device cuda is not on this host .* use --device cpu"):
        targets.make_step(targets.load_target(LLAMA), preset="tiny", device="cuda")
    with pytest.raises(UsageError, match=r"targets:llama_step \(preset gpu\): device cuda is not on this host"):
        targets.make_step(targets.load_target(LLAMA))  # the gpu preset's default device
