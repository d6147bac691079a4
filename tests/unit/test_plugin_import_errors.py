"""A plugin file that fails to import names itself (issue 45): the row's reason is `kernels/<op>/<file>.py:LINE:
ModuleNotFoundError: ...`, the line the innermost one inside the plugin file, for an implementation, a backend
adapter and a spec alike; the traceback stays on the lines below (results.jsonl)."""
import pytest

from opmatrix.core.jobs import CellPlan, CellSpec, DeviceSpec, JobSpec, Settings, ToolchainSpec
from opmatrix.incell import entry
from tests.helpers import CPU, PROBE_SPEC, job_row, plugin_root, probe_adapter

GOOD = "def build(w, dtype, device, variant):\n    return lambda x, out: out.copy_(x * 2)\n"


def test_an_implementation_that_fails_to_import_names_its_file_and_line(tmp_path):
    plugin_root(tmp_path, {"torch_compile": '"""a typo on line 3."""\n\nimport torhc\n' + GOOD})
    row = job_row(tmp_path, "torch_compile")
    first = row.error.splitlines()[0]
    assert row.status == "env_error", row.error
    assert first == "kernels/probe/torch_compile.py:3: ModuleNotFoundError: No module named 'torhc'", row.error
    assert "Traceback" in row.error  # the frames, below the reason


def test_a_helper_that_fails_inside_the_import_is_named_at_the_plugins_own_line(tmp_path):
    (tmp_path / "helper_mod_for_probe.py").write_text("raise RuntimeError('helper is broken')\n")
    plugin_root(tmp_path, {"fast": f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\n"
                                   "import helper_mod_for_probe\n" + GOOD})
    row = job_row(tmp_path, "fast")
    assert row.error.splitlines()[0] == "kernels/probe/fast.py:3: RuntimeError: helper is broken", row.error


def test_a_backend_adapter_that_does_not_parse_names_its_file_and_line(tmp_path):
    plugin_root(tmp_path, {"fast": GOOD}, adapters={"fast": probe_adapter() + "def covers(device)\n"})
    row = job_row(tmp_path, "fast")
    first = row.error.splitlines()[0]
    assert row.status == "env_error" and first.startswith("backends/fast.py:4: SyntaxError: "), row.error
    assert "(the backend adapter failed to load)" in first


@pytest.mark.parametrize("spec", ["import torhc\n" + PROBE_SPEC, PROBE_SPEC + "\nWORKLOADS = {\n"])
def test_a_spec_that_fails_to_import_in_the_cell_names_its_file_and_line(tmp_path, spec):
    plugin_root(tmp_path, {"fast": GOOD}, spec=spec)
    job = JobSpec("probe", "quick", "float32", "fast", "default", 60)
    cell = CellSpec("cpu.host", DeviceSpec("cpu", "cpu", "x86_64"), ToolchainSpec("host", system=True), "test")
    plan = CellPlan(run_id="r", cell=cell, jobs=(job,), settings=Settings(), kernels_dir=str(tmp_path / "kernels"),
                    backends_dir=str(tmp_path / "backends"), scratch_dir=str(tmp_path / "scratch"))
    group = entry.Group(plan, [job], CPU)
    line = 1 if spec.startswith("import") else len(spec.splitlines())
    assert group.spec_error.splitlines()[0].startswith(f"the kernel's spec failed: kernels/probe/spec.py:{line}: "), \
        group.spec_error
    group.close()
