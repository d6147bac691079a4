"""`opmatrix validate` end to end on the CPU tiny Llama (torch + transformers, random weights), each a profile or a
validate of seconds: the command line after `opmatrix profile`, torch.compile's generated C++ swapped in for rope,
rmsnorm and swiglu and matching the model's logits, and --from-run taking its choices and microbenchmark speed-ups
from a stored run folder (tests/validate_steps.py). The registry, the output check, the paired timing and the
verdict rules: tests/unit/test_validate.py."""
from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from opmatrix.cli import main  # noqa: E402
from opmatrix.validate import check, measure, verdict  # noqa: E402
from tests.validate_steps import LLAMA, say, stored_run, swaps_for, tiny_llama  # noqa: E402


@pytest.fixture(scope="module")
def step():
    return tiny_llama()


@pytest.mark.integration  # a profile and a validate of the tiny Llama, end to end: seconds
def test_cli_profile_then_validate_end_to_end(tmp_path, capsys):
    reports = str(tmp_path)
    assert main(["profile", LLAMA, "--preset", "tiny", "--steps", "2", "--reports", reports, "--run-id", "prof",
                 "--json"]) == 0
    shares = {g["group"]: g["share"] for g in json.loads((tmp_path / "prof" / "profile.json").read_text())["groups"]}
    capsys.readouterr()
    assert main(["validate", "llama", "--preset", "tiny", "--use", "rope=torch,swiglu=torch", "--rounds", "3",
                 "--max-rounds", "3", "--profile", "prof", "--reports", reports, "--run-id", "val"]) == 0
    out = capsys.readouterr()
    assert "Swaps in the model" in out.out and "round 3:" in out.err
    data = json.loads((tmp_path / "val" / "validate.json").read_text())
    assert data["profile"].endswith("profile.json") and data["noise"]["rounds"] == 3
    rows = {r["variant"]: r for r in data["rows"]}
    assert set(rows) == {"rope=torch", "swiglu=torch", measure.ALL}
    for r in rows.values():
        assert r["rel_err"] == 0.0 and r["rounds"] == 3 and r["gain_lo"] <= r["gain"] <= r["gain_hi"]
        assert r["predicted"] is None and "no microbenchmark speed-up" in r["prediction"]  # no --from-run: said
        assert r["verdict"] in (verdict.NO_GAIN, verdict.NO_PREDICTION)
    assert rows["rope=torch"]["parts"][0]["share"] == pytest.approx(shares["rope"])
    md = (tmp_path / "val" / "validate.md").read_text()
    assert "| rope=torch |" in md and "A/A" in md


@pytest.mark.integration
def test_torch_compile_swaps_match_the_model(step):
    """A real non-framework implementation on the CPU: inductor's generated C++ for rope, rmsnorm and swiglu."""
    _, checked, _ = check.check_outputs(step, swaps_for("rope=torch-compile,rmsnorm=torch-compile,"
                                                        "swiglu=torch-compile"), say)
    for c in checked:
        assert not c.unfit and c.applied, c
        assert 0 <= c.rel_err <= check.TOLERANCE["float32"] and math.isfinite(c.rel_err)


@pytest.mark.integration  # a validate of the tiny Llama, end to end, as its neighbours
def test_cli_from_run_names_the_micro_speedup_of_the_baseline(tmp_path, capsys):
    folder = stored_run(tmp_path / "kernels-run")
    assert main(["validate", "llama", "--preset", "tiny", "--use", "rope=torch", "--from-run", str(folder),
                 "--rounds", "3", "--max-rounds", "3", "--reports", str(tmp_path), "--run-id", "v", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert row["parts"][0]["micro_speedup"] == 1.0 and "baseline" in row["parts"][0]["micro"]
    assert "no profile share" in row["prediction"]


@pytest.mark.integration
def test_cli_from_run_swaps_what_its_verdicts_adopt(tmp_path, capsys):
    folder = stored_run(tmp_path / "kernels-run")
    assert main(["validate", "llama", "--preset", "tiny", "--from-run", str(folder), "--rounds", "3",
                 "--max-rounds", "3", "--reports", str(tmp_path), "--run-id", "v", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert row["variant"] == "rope=torch-compile" and row["rel_err"] <= row["tolerance"]
    assert row["parts"][0]["micro_speedup"] == 2.0 and row["verdict"] != verdict.WRONG
