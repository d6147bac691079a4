"""A fault in the kernel's spec is the spec's, never a device's (issue 44 §5): a reference that raises, one that is
not finite, inputs it cannot handle, all make the group's rows env_error in phase `spec` naming the spec file, the
verdict `not judged`, and `opmatrix deployments` keeps the last run that measured the framework. So does a baseline
whose package is not installed. Real cells through the judge; the verdicts and deployments read the stored rows."""
import json

import pytest

from opmatrix import plan as plan_mod
from opmatrix.core.acceptance import Acceptance
from opmatrix.core.result import Result
from opmatrix.decide.verdicts import GAP, NOT_JUDGED, decide
from opmatrix.incell.cell_runner import run_cell
from opmatrix.matrix import load_matrix
from opmatrix.store import ResultStore, add_speedup, frame
from opmatrix.upgrade.deployments import deployments
from tests.helpers import PROBE_SPEC, probe_adapter, probe_matrix, write_plugins

pytestmark = pytest.mark.integration  # real cells

GOOD = "def build(w, dtype, device, variant):\n    return lambda x, out: out.copy_(x * 2)\n"
SPECS = {
    "raises": PROBE_SPEC.replace("return inputs[0].double() * 2", "raise ValueError('reference not written yet')"),
    "nan": PROBE_SPEC.replace("return inputs[0].double() * 2", "return inputs[0].double() * float('nan')"),
    "inf-inputs": PROBE_SPEC.replace("return (torch.randn(", "return (float('inf') * torch.randn("),
    # a kind of inputs that holds inf, where the spec does not declare it in NONFINITE_KINDS
    "inf-kind-undeclared": PROBE_SPEC.replace("return (torch.randn(", "return ((float('inf') if w.get('inputs') == "
                                              "'large' else 1.0) * torch.randn(")
    + 'INPUT_KINDS = ("normal", "large")\n',
}
# a spec whose inputs hold inf and NaN where the operation defines them (x * 2: inf, -inf, NaN), and a few x1e4
SPECIAL_VALUES = PROBE_SPEC.replace("    return (torch.randn(w[\"n\"], generator=g, dtype=getattr(torch, dtype)),)", """\
    x = torch.randn(w["n"], generator=g, dtype=getattr(torch, dtype))
    if w.get("inputs") == "outliers":
        x[::16] *= 1e4
    if w.get("inputs") == "specials":
        x[:3] = torch.tensor([float("inf"), float("-inf"), float("nan")])
    return (x,)""") + 'INPUT_KINDS = ("normal", "outliers", "specials")\nNONFINITE_KINDS = ("specials",)\n'


def _rows(tmp_path, spec: str, adapter: str = probe_adapter()) -> list[Result]:
    write_plugins(tmp_path, "probe", {"torch": GOOD, "fast": GOOD}, adapter)
    (tmp_path / "kernels" / "probe" / "spec.py").write_text(spec)
    probe_matrix(tmp_path, "spec-fault", ["torch", "fast"], ["quick"], timeout_s=60, rep_ms=5)
    (plan,) = plan_mod.cell_plans(load_matrix(tmp_path / "m.toml"), "spec-fault", tmp_path / "scratch")
    return list(run_cell(plan))


@pytest.mark.parametrize("fault", list(SPECS))
def test_a_failing_spec_fails_its_groups_rows_as_its_own_fault_and_nothing_is_judged(tmp_path, fault):
    rows = _rows(tmp_path, SPECS[fault])
    assert {r.backend for r in rows} == {"torch", "fast"}
    for r in rows:
        assert (r.status, r.phase) == ("env_error", "spec"), (r.status, r.phase, r.error)
        assert "kernels/probe/spec.py" in r.error and "the kernel's spec failed" in r.error, r.error
    (v,) = decide(add_speedup(frame(rows), "torch"), Acceptance("torch"))
    assert v.verdict == NOT_JUDGED and "spec" in v.reason and v.verdict != GAP


def test_special_values_the_spec_declares_are_judged_by_its_reference(tmp_path):
    """inf and NaN in the inputs where the spec declares them: the honest rows hold the reference's own special
    values and are ok; a contestant that replaces them with numbers, or clamps its inputs, is a mismatch."""
    write_plugins(tmp_path, "probe", {"torch": GOOD, "fast": GOOD,
                                      "nonan": "import torch\n" + GOOD.replace("x * 2", "torch.nan_to_num(x * 2)"),
                                      "clamps": GOOD.replace("x * 2", "x.clamp(-100, 100) * 2")}, probe_adapter())
    (tmp_path / "kernels" / "probe" / "spec.py").write_text(SPECIAL_VALUES)
    probe_matrix(tmp_path, "special-values", ["torch", "fast", "nonan", "clamps"], ["quick"], timeout_s=60,
                 rep_ms=5)
    (plan,) = plan_mod.cell_plans(load_matrix(tmp_path / "m.toml"), "special-values", tmp_path / "scratch")
    rows = {r.backend: r for r in run_cell(plan)}
    for backend in ("nonan", "clamps"):
        print(f"\n{backend}: {rows[backend].status} in phase {rows[backend].phase}: {rows[backend].error}")
    for backend in ("torch", "fast"):
        assert rows[backend].status == "ok" and rows[backend].bad_elements == 0, rows[backend].error
    assert rows["nonan"].status == "mismatch" and "kind 'specials'" in rows["nonan"].error, rows["nonan"].error
    assert rows["clamps"].status == "mismatch" and "kind 'outliers'" in rows["clamps"].error, rows["clamps"].error


def test_a_run_that_did_not_measure_the_framework_leaves_the_deployment_to_the_last_that_did(tmp_path):
    def stored(run_id: str, started: str, rows: list[Result]):
        folder = tmp_path / "reports" / run_id
        store = ResultStore(folder)
        for r in rows:
            store.append(r.__class__(**{**r.__dict__, "run_id": run_id, "torch": "2.13.0"}))
        verdicts = decide(add_speedup(frame(rows), "torch"), Acceptance("torch"))
        (folder / "run.json").write_text(json.dumps({"run_id": run_id, "started_at": started, "baseline": "torch"}))
        (folder / "verdicts.json").write_text(json.dumps([v.__dict__ | {"candidates": []} for v in verdicts]))
        return folder

    good = _rows(tmp_path / "good", PROBE_SPEC)
    missing = _rows(tmp_path / "missing", PROBE_SPEC, adapter="def available():\n    raise ImportError('no torch')\n"
                    "from opmatrix.kit import Unavailable\n")
    assert {r.status for r in missing} <= {"not_installed", "env_error"}, [(r.status, r.error) for r in missing]
    earlier = stored("earlier", "2026-12-01T00:00:00+00:00", good)
    later = stored("later", "2026-12-02T00:00:00+00:00", missing)
    (later_verdict,) = json.loads((later / "verdicts.json").read_text())
    assert later_verdict["verdict"] == NOT_JUDGED and "not measured" in later_verdict["reason"]
    (line,) = deployments([earlier, later])
    assert line.run_id == "earlier" and line.support.startswith("supported")
