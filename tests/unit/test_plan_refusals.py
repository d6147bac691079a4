"""plan (and run) refuse plugin files that do not parse, break their contract or fail to import, with exit 2, the
file and line, and a fix that applies to what went wrong (issue 45): a backend adapter is read like an
implementation; a spec's syntax error or its own code's error gets no framework hint; a name a module lacks is
not a framework import; a refused kernel is never listed among the allowed names."""
import pytest

from opmatrix import cli
from tests.helpers import PROBE_SPEC, probe_adapter, probe_matrix, write_plugins

GOOD = "def build(w, dtype, device, variant):\n    return None\n"


def _project(tmp_path):
    write_plugins(tmp_path, "probe", {"torch": GOOD, "fast": GOOD}, probe_adapter())
    return probe_matrix(tmp_path, "refusals", ["torch", "fast"], ["quick"], timeout_s=60, rep_ms=5)


def test_an_adapter_that_does_not_parse_is_refused_by_plan_and_run(tmp_path, capsys):
    matrix = _project(tmp_path)
    (tmp_path / "backends" / "fast.py").write_text("def available(:\n    return '1'\n")
    assert cli.main(["plan", str(matrix)]) == 2
    err = capsys.readouterr().err
    assert f"backends[1] = 'fast': {tmp_path / 'backends' / 'fast.py'}:1: invalid syntax" in err
    assert "fix that line" in err
    reports = tmp_path / "reports"
    assert cli.main(["run", str(matrix), "--no-ray", "--reports", str(reports), "--run-id", "r"]) == 2
    assert "backends/fast.py:1: invalid syntax" in capsys.readouterr().err and not (reports / "r").exists()


def test_an_adapters_misspelt_constant_is_refused_by_plan(tmp_path, capsys):
    matrix = _project(tmp_path)
    (tmp_path / "backends" / "fast.py").write_text(probe_adapter() + "TIMD = False\n")
    assert cli.main(["plan", str(matrix)]) == 2
    assert "unknown module constant TIMD; did you mean TIMED?" in capsys.readouterr().err


@pytest.mark.parametrize("first, line, words", [
    ("WORKLOADS = {", 1, ["'{' was never closed", "the file does not parse: fix that line"]),
    ("X = undefined_name", 1, ["failed to import (NameError: name 'undefined_name' is not defined)",
                               "the spec's module-level code raised: fix that line"]),
    ("from opmatrix.kit import ITEMSZE", 1, ["cannot import name 'ITEMSZE'", "fix the name on that line"]),
    ("import os\nimport torhc", 2, ["No module named 'torhc'", "a spec imports no framework at module level",
                                    "import torhc inside make_inputs"]),
], ids=["syntax", "own-code", "missing-name", "framework"])
def test_a_spec_that_fails_names_its_line_with_a_fix_that_applies(tmp_path, capsys, first, line, words):
    matrix = _project(tmp_path)
    spec = first + "\n" + ("" if first.startswith("WORKLOADS") else PROBE_SPEC)
    (tmp_path / "kernels" / "probe" / "spec.py").write_text(spec)
    assert cli.main(["plan", str(matrix)]) == 2
    err = capsys.readouterr().err
    assert f"kernel[0].name = 'probe': {tmp_path / 'kernels' / 'probe' / 'spec.py'}:{line}: " in err, err
    for word in words:
        assert word in err, err
    if "torhc" not in first:
        assert "imports no framework" not in err  # the hint is for a missing framework module only
    assert "allowed:" not in err and "Traceback" not in err  # the kernel exists: it is never offered as allowed
