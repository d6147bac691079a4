"""`opmatrix validate`: kernels swapped into a real tiny Llama step (torch + transformers on the CPU, random
weights) through the model registry, the logits checked against the unmodified model (a deliberately wrong kernel,
loaded by path like any kernel, is caught), the paired interleaved timing, the verdict rules on synthetic numbers,
the command line's refusals and a wrong kernel's exit, and a stored run as the source of choices and
microbenchmark speed-ups (tests/validate_steps.py). No mocks. The command line end to end, torch.compile's swaps
and --from-run: tests/cells/test_validate.py."""
from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from opmatrix import paths  # noqa: E402
from opmatrix.cli import UsageError, main  # noqa: E402
from opmatrix.decide.stats import Interval  # noqa: E402
from opmatrix.profile import ops, profiler, targets  # noqa: E402
from opmatrix.sites import registry  # noqa: E402
from opmatrix.validate import check, measure, swap, verdict  # noqa: E402
from opmatrix.incell import plugins  # noqa: E402
from tests.validate_steps import say, stored_run, swaps_for, tiny_llama  # noqa: E402

WRONG_ROPE = '''"""A deliberately wrong rope: rotate_half without the negation (cat(x2, x1) instead of cat(-x2, x1))."""
import torch

from opmatrix.kit import Built


def build(workload, dtype, device, variant):
    heads, half = workload["heads"], workload["head_dim"] // 2

    def rope(q, k, cos, sin, out):
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        swap = lambda x: torch.cat((x[..., half:], x[..., :half]), dim=-1)  # noqa: E731
        torch.add(q * cos, swap(q) * sin, out=out[:, :heads])
        torch.add(k * cos, swap(k) * sin, out=out[:, heads:])

    return Built(rope)
'''


@pytest.fixture(scope="module")
def step():
    return tiny_llama()


def shipped_kernel_dir(kernel: str) -> Path:
    """Where validate finds a shipped kernel (no project folder)."""
    return plugins.discover(paths.BUILTIN_KERNELS, paths.BUILTIN_BACKENDS).kernel_dir(kernel)


@pytest.fixture
def wrong_kernels(tmp_path):
    """A kernels folder holding rope's real spec and a wrong implementation, wrong.py."""
    folder = tmp_path / "kernels" / "rope"
    folder.mkdir(parents=True)
    shutil.copy(paths.BUILTIN_KERNELS / "rope" / "spec.py", folder / "spec.py")
    (folder / "wrong.py").write_text(WRONG_ROPE, encoding="utf-8")
    return tmp_path / "kernels"


# --- the registry: one table for profile and validate ---------------------------------------------------------------

def test_registry_is_the_profiles_table_and_its_kernels_exist():
    assert ops.MODULE_GROUPS == registry.module_sites() and ("RMSNorm", ops.RMSNORM) in ops.MODULE_GROUPS
    assert (registry.LLAMA, "apply_rotary_pos_emb", ops.ROPE) in ops.FUNCTION_GROUPS
    assert all(s.group in ops.GROUPS for s in registry.SITES)
    assert set(registry.swappable()) == {"rope", "rmsnorm", "swiglu"}
    for kernel in registry.swappable():
        assert (paths.BUILTIN_KERNELS / kernel / "spec.py").is_file()
        for site in registry.swap_sites(kernel):
            owner, name = registry.resolve(site)  # the site exists in the installed transformers
            assert callable(getattr(owner, name))


# --- swaps in the model: the output check ---------------------------------------------------------------------------

def test_swapped_kernels_run_in_the_model_match_its_logits_and_are_taken_out_after(step):
    from transformers.models.llama import modeling_llama

    originals = (modeling_llama.apply_rotary_pos_emb, modeling_llama.LlamaRMSNorm.forward,
                 modeling_llama.LlamaMLP.forward)
    swaps = swaps_for("rope=torch,rmsnorm=torch,swiglu=torch")
    floor, checked, dtype = check.check_outputs(step, swaps, say)
    assert dtype == "float32" and floor == 0.0
    assert [c.name for c in checked] == ["rope=torch", "rmsnorm=torch", "swiglu=torch", measure.ALL]
    for c in checked:
        assert not c.unfit and c.applied, c
        assert c.rel_err <= check.TOLERANCE["float32"]
    # called where the model calls them: per layer (2), and norms 2 per layer + the final one
    calls = {s.kernel.choice.kernel: s.kernel.calls for s in swaps}
    assert calls == {"rope": 2 * 2, "rmsnorm": 2 * (2 * 2 + 1), "swiglu": 2 * 2}  # twice: alone and all together
    assert swaps[0].kernel.workloads == [{"batch": 2, "heads": 4, "kv_heads": 4, "seq": 32, "head_dim": 16}]
    assert (modeling_llama.apply_rotary_pos_emb, modeling_llama.LlamaRMSNorm.forward,
            modeling_llama.LlamaMLP.forward) == originals


def test_validate_takes_a_kernel_from_where_a_run_would(wrong_kernels):
    """The project's kernels folder wins over the shipped one of the same name (as in `opmatrix run`); without one,
    the shipped kernel is used."""
    (project,) = swaps_for("rope=wrong", wrong_kernels)
    assert Path(project.kernel.impl.__file__).parent == wrong_kernels / "rope"
    (shipped,) = swaps_for("rope=torch")
    assert Path(shipped.kernel.impl.__file__).parent == paths.BUILTIN_KERNELS / "rope"
    with pytest.raises(UsageError, match=r"no torch\.py in .*kernels/rope"):
        swaps_for("rope=torch", wrong_kernels)  # the project's rope folder is the whole of rope, as in a run


def test_a_wrong_kernel_gives_wrong_output(step, wrong_kernels):
    swaps = swaps_for("rope=wrong", wrong_kernels)
    _, checked, _ = check.check_outputs(step, swaps, say)
    (c,) = checked
    assert c.applied and c.rel_err > 10 * check.TOLERANCE["float32"]  # 6e-3 here: a sign flip in every layer
    outcome = verdict.decide(c.rel_err, check.TOLERANCE["float32"], Interval(1.5, 1.4, 1.6), 1.02,
                             verdict.Prediction(1.6), True)
    assert outcome.verdict == verdict.WRONG and "tolerance" in outcome.reason


def test_an_adapter_refuses_a_call_it_cannot_serve(step):
    from transformers.models.llama import modeling_llama

    swaps = swaps_for("rmsnorm=torch")
    norm = modeling_llama.LlamaRMSNorm(8, eps=1e-5)
    with swap.active(swaps), pytest.raises(Exception, match="eps 1e-05"):
        norm(torch.randn(3, 8))


def test_a_swap_the_step_never_calls_is_not_applied():
    block = targets.make_step(targets.load_target("opmatrix.profile.targets:block_step"), preset="tiny")
    _, checked, _ = check.check_outputs(block, swaps_for("rope=torch"), say)
    assert not checked[0].applied
    assert verdict.decide(0.0, 1e-4, None, 1.0, verdict.Prediction(None), None, applied=False).verdict == \
        verdict.NOT_APPLIED


# --- the paired measurement -----------------------------------------------------------------------------------------

def test_paired_rounds_give_intervals_for_every_variant_and_the_aa_twin(step):
    swaps = swaps_for("rope=torch")
    check.check_outputs(step, swaps, say)
    settings = measure.settings_for(measure.estimate_ms(step, "cpu"), rounds=4, max_rounds=4,
                                    round_extra_s=0)
    lines = []
    timed = measure.paired(step, "cpu", {"rope=torch": swaps}, settings, lines.append)
    assert [t.name for t in timed] == [measure.BASELINE, measure.TWIN, "rope=torch"]
    assert len(lines) == 4 and lines[0].startswith("round 1:")
    base, twin, rope = timed
    assert base.interval is None and len(base.round_ms) == 4 and base.timer.startswith("wallclock")
    for t in (twin, rope):
        assert len(t.ratios) == 4 and t.interval is not None
        assert t.interval.lo <= t.interval.estimate <= t.interval.hi
        assert t.interval.estimate == pytest.approx(statistics.median(t.ratios))


# --- the verdict rules on synthetic numbers -------------------------------------------------------------------------

def test_amdahl_of_parts_is_the_profiles_amdahl_for_one_part():
    assert verdict.amdahl_parts([(0.2, 2.0)]) == pytest.approx(profiler.amdahl(0.2, 2.0))
    assert verdict.amdahl_parts([(0.2, 2.0), (0.1, 4.0)]) == pytest.approx(1 / (0.7 + 0.1 + 0.025))
    micro = verdict.Micro(2.0, 1.9, 2.1, "test")
    p = verdict.predict([verdict.Part("rope", "rope", 0.1, micro), verdict.Part("swiglu", "swiglu", 0.2, micro)])
    assert p.predicted == pytest.approx(1 / (0.7 + 0.15))
    missing = verdict.predict([verdict.Part("rope", "rope", None, micro, ("no profile share",))])
    assert missing.predicted is None and "no profile share" in missing.text()


@pytest.mark.parametrize("measured, predicted, micro_wins, expected", [
    (Interval(1.06, 1.04, 1.08), 1.08, True, verdict.CONFIRMED),  # real, within the prediction
    (Interval(1.06, 1.04, 1.08), 1.10, None, verdict.CONFIRMED),
    (Interval(1.30, 1.25, 1.35), 1.08, True, verdict.EXCEEDS),  # far beyond what the share allows
    (Interval(1.00, 0.98, 1.03), 1.08, True, verdict.WINS_ALONE),  # the kernel won alone, the model does not
    (Interval(1.00, 0.98, 1.03), 1.08, False, verdict.NO_GAIN),
    (Interval(1.015, 1.005, 1.02), 1.08, True, verdict.WINS_ALONE),  # above 1 but inside the A/A noise
    (Interval(1.06, 1.04, 1.08), None, True, verdict.NO_PREDICTION),  # real gain, nothing to check it against
])
def test_verdict_rules(measured, predicted, micro_wins, expected):
    limit = verdict.threshold(Interval(1.0, 0.99, 1.01))  # A/A half-width 1 % -> threshold 1.02
    assert limit == pytest.approx(1.02)
    prediction = verdict.Prediction(predicted, () if predicted else ("no profile share",))
    outcome = verdict.decide(1e-6, 1e-4, measured, limit, prediction, micro_wins)
    assert outcome.verdict == expected, outcome.reason
    if predicted is None:
        assert "no profile share" in outcome.reason


def test_a_prediction_below_the_noise_is_said_so():
    outcome = verdict.decide(0.0, 1e-4, Interval(1.0, 0.99, 1.01), 1.02, verdict.Prediction(1.003), True)
    assert outcome.verdict == verdict.WINS_ALONE and "cannot resolve" in outcome.reason


# --- the command line -----------------------------------------------------------------------------------------------

def test_cli_wrong_kernel_exits_1_with_wrong_output(tmp_path, wrong_kernels, capsys):
    code = main(["validate", "llama", "--preset", "tiny", "--use", "rope=wrong", "--rounds", "3", "--max-rounds",
                 "3", "--kernels", str(wrong_kernels), "--reports", str(tmp_path), "--run-id", "w", "--json"])
    assert code == 1
    data = json.loads(capsys.readouterr().out)
    (row,) = data["rows"]
    assert row["verdict"] == verdict.WRONG and row["gain"] is None and row["rel_err"] > 10 * row["tolerance"]


@pytest.mark.parametrize("argv, message", [
    (["--use", "rope"], "not KERNEL=BACKEND"),
    (["--use", "gemm_relu=torch"], "no model site is wired to kernel 'gemm_relu'"),
    (["--use", "rope=nosuch"], "no nosuch.py"),
    (["--use", "rope=torch", "--rounds", "2"], "at least 3"),
    ([], "--use KERNEL=BACKEND"),
    (["--use", "rope=torch", "--profile", "nosuch"], "no profile.json"),
])
def test_cli_errors_name_what_is_wrong(tmp_path, capsys, argv, message):
    assert main(["validate", "llama", "--preset", "tiny", "--reports", str(tmp_path), *argv]) == 2
    assert message in capsys.readouterr().err


def test_parse_use():
    assert swap.parse_use("rope=triton, swiglu=tilelang[tuned]") == [
        swap.Choice("rope", "triton"), swap.Choice("swiglu", "tilelang", "tuned")]
    with pytest.raises(UsageError, match="named twice"):
        swap.parse_use("rope=triton,rope=torch")


# --- a matrix run as the source of choices and microbenchmark speed-ups ---------------------------------------------

def test_a_runs_verdicts_choose_and_its_rows_give_the_micro_speedup(tmp_path):
    from opmatrix.validate import sources

    folder = stored_run(tmp_path / "kernels-run")
    choices = sources.chosen(folder, "cpu", None)
    assert choices == [swap.Choice("rope", "torch-compile")]
    with pytest.raises(UsageError, match="no nvidia devices"):
        sources.chosen(folder, "nvidia", None)
    small = {"batch": 2, "heads": 4, "kv_heads": 2, "seq": 64, "head_dim": 64}  # spec WORKLOADS["small_d64"]
    (micro, why), = sources.micro_speedups(folder, choices, {"rope": small}, "float32", "cpu", None,
                                           shipped_kernel_dir).values()
    assert micro.estimate == pytest.approx(2.0) and "small_d64" in micro.source and "model's shape" in micro.source
    tiny = {"batch": 2, "heads": 4, "kv_heads": 4, "seq": 32, "head_dim": 16}  # no workload of the run has it
    (micro, why), = sources.micro_speedups(folder, choices, {"rope": tiny}, "float32", "cpu", None,
                                           shipped_kernel_dir).values()
    assert micro.estimate == 2.0 and "geometric mean" in micro.source
    (micro, why), = sources.micro_speedups(folder, choices, {"rope": tiny}, "bfloat16", "cpu", None,
                                           shipped_kernel_dir).values()
    assert micro.estimate == 2.0 and "geometric mean" in micro.source  # the verdict's, across dtypes: said so


def test_a_kernel_whose_model_code_is_a_variant_is_measured_against_it_round_by_round(tmp_path):
    """rmsnorm's baseline (F.rms_norm) is not the model's LlamaRMSNorm: the registry names torch[llama], and the
    micro speed-up is the choice against that row of the same rounds, not against the baseline."""
    from opmatrix.core.result import Result
    from opmatrix.store import ResultStore
    from opmatrix.validate import sources

    assert next(s for s in registry.swap_sites("rmsnorm")).eager == "torch[llama]"
    folder = tmp_path / "rmsnorm-run"
    store = ResultStore(folder)
    common = dict(run_id=folder.name, cell="cpu.host", device="cpu", toolchain="host", vendor="cpu",
                  kernel="rmsnorm", workload="small_1024", dtype="float32", status="ok", pairing="interleaved")
    base = [1.0, 1.1, 0.9, 1.0, 1.05]
    store.append(Result(**common, backend="torch", variant="default", round_ms=base, aa_round_ms=base))
    store.append(Result(**common, backend="torch", variant="llama", round_ms=[3 * b for b in base],
                        baseline_round_ms=base))
    store.append(Result(**common, backend="triton", variant="default", round_ms=[b / 2 for b in base],
                        baseline_round_ms=base))
    choice = [swap.Choice("rmsnorm", "triton")]
    shape = {"tokens": 256, "hidden": 1024}  # spec WORKLOADS["small_1024"]
    (micro, _), = sources.micro_speedups(folder, choice, {"rmsnorm": shape}, "float32", "cpu", None, shipped_kernel_dir,
                                         {"rmsnorm": "torch[llama]"}).values()
    assert micro.estimate == pytest.approx(6.0) and "torch[llama]" in micro.source  # 3 / 0.5, not 1 / 0.5
    (micro, _), = sources.micro_speedups(folder, choice, {"rmsnorm": shape}, "float32", "cpu", None,
                                         shipped_kernel_dir).values()
    assert micro.estimate == pytest.approx(2.0)  # no eager named: against the run's baseline
    (micro, why), = sources.micro_speedups(folder, choice, {"rmsnorm": {"tokens": 3, "hidden": 3}}, "float32",
                                           "cpu", None, shipped_kernel_dir, {"rmsnorm": "torch[llama]"}).values()
    assert micro is None and "model's shape" in why  # never a speed-up of another shape against the model's code
