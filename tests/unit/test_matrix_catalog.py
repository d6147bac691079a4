"""The names check: every backend, kernel, workload, dtype and exclude a matrix names exists in the plugin
folders (or, for excludes, in the matrix), else MatrixError with the file, key path, value and allowed names."""
import os
import subprocess
import sys

import pytest

from opmatrix import catalog, paths
from opmatrix.catalog import Catalog
from opmatrix.matrix import MatrixError, load_matrix

from tests.helpers import PROBE_SPEC, REPO

BASE = """
name = "c"
backends = ["torch", "tilelang"]
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
[[device]]
id = "gpu"
vendor = "nvidia"
arch = "sm_90"
[[toolchain]]
name = "host"
system = true
[[kernel]]
name = "gemm_relu"
workloads = { cpu = ["tiny_ragged"], nvidia = ["square_4096"] }
dtypes = { cpu = ["float32"], nvidia = ["float16"] }
[[kernel]]
name = "flash_attention"
backends = ["torch", "tilelang"]
workloads = { cpu = ["b1_h2_s128_d64"] }
dtypes = { cpu = ["float32"] }
"""


def refusal(path) -> list[str]:
    """The problem lines of the MatrixError that loading and checking the file raises (after the file line)."""
    with pytest.raises(MatrixError) as err:
        catalog.check(load_matrix(path))
    first, *lines = str(err.value).splitlines()
    assert first.startswith(f"{path}: "), first
    return [line.strip() for line in lines]


def assert_refused(path, key: str, value: str, *allowed: str) -> None:
    lines = [line for line in refusal(path) if line.startswith(f"{key} = {value!r}: ")]
    assert lines, f"no line for {key} = {value!r}"
    for fragment in allowed:
        assert fragment in lines[0], lines[0]


def test_the_base_matrix_passes_and_check_returns_the_catalog(write_matrix):
    found = catalog.check(load_matrix(write_matrix(BASE)))
    assert isinstance(found, Catalog)
    assert found.kernels() == ("add_rmsnorm", "decode_attention", "flash_attention", "gemm_relu", "rmsnorm", "rope", "swiglu")
    assert {"torch", "torch-compile", "tilelang", "triton", "blaslt", "cutlass"} <= set(found.backends())
    gemm = found.kernel("gemm_relu")
    assert gemm.dtypes == ("float16", "bfloat16", "float32") and gemm.declared
    assert "tiny_ragged" in gemm.workloads
    assert found.variants("gemm_relu", "tilelang") == ("tile", "ws", "tuned", "cpu")
    assert found.variants("gemm_relu", "torch") == ("default",)


ADAPTERS = "backend adapter in"
# what the package ships, listed as the refusals list it (the folders are read, so added plugins keep this true)
SHIPPED_BACKENDS = ", ".join(sorted(p.stem.replace("_", "-") for p in paths.BUILTIN_BACKENDS.glob("*.py")
                                    if not p.name.startswith("_")))
SHIPPED_KERNELS = sorted(p.name for p in paths.BUILTIN_KERNELS.iterdir() if (p / "spec.py").is_file())


@pytest.mark.parametrize("old, new, key, value", [
    ('backends = ["torch", "tilelang"]\n[[device]]', 'backends = ["torch", "tilelang", "cutlas"]\n[[device]]',
     "backends[2]", "cutlas"),
    ('backends = ["torch", "tilelang"]\nworkloads = { cpu = ["b1', 'backends = ["torch", "triton2"]\nworkloads = '
     '{ cpu = ["b1', "kernel[1].backends[1]", "triton2"),
    ('backends = ["torch", "tilelang"]\n[[device]]', 'backends = ["torch", "torch_compile"]\n[[device]]',
     "backends[1]", "torch_compile"),
])
def test_backends_need_an_adapter_file(write_matrix, old, new, key, value):
    assert BASE.count(old) == 1
    assert_refused(write_matrix(BASE.replace(old, new)), key, value, ADAPTERS, str(paths.BUILTIN_BACKENDS),
                   f"allowed: {SHIPPED_BACKENDS}")


def test_unknown_kernel_lists_the_kernels(write_matrix):
    path = write_matrix(BASE.replace('name = "flash_attention"', 'name = "flash_atention"'))
    assert_refused(path, "kernel[1].name", "flash_atention", "no kernel spec", "flash_atention/spec.py",
                   f"allowed: {', '.join(SHIPPED_KERNELS)}")


@pytest.mark.parametrize("old, new, key, value", [
    ('cpu = ["tiny_ragged"]', 'cpu = ["tiny_ragged", "huge"]', "kernel[0].workloads.cpu[1]", "huge"),
    ('nvidia = ["square_4096"]', 'nvidia = ["b1_h2_s128_d64"]', "kernel[0].workloads.nvidia[0]", "b1_h2_s128_d64"),
])
def test_workloads_must_be_defined_by_the_spec(write_matrix, old, new, key, value):
    assert_refused(write_matrix(BASE.replace(old, new)), key, value, "gemm_relu/spec.py defines",
                   "allowed: square_4096, square_8192, llm_skinny")


@pytest.mark.parametrize("dtype", ["float8", "int64", "float", "torch.float16", "float64"])
def test_dtypes_must_be_declared_by_the_spec(write_matrix, dtype):
    path = write_matrix(BASE.replace('nvidia = ["float16"]', f'nvidia = ["float16", "{dtype}"]'))
    assert_refused(path, "kernel[0].dtypes.nvidia[1]", dtype, "gemm_relu/spec.py declares",
                   "allowed: float16, bfloat16, float32")


@pytest.mark.parametrize("exclude, key, value, allowed", [
    ('device = "gpu9"', "exclude[0].device", "gpu9", "allowed: cpu, gpu"),
    ('toolchain = "hots"', "exclude[0].toolchain", "hots", "allowed: host"),
    ('kernel = "rmsnorm"', "exclude[0].kernel", "rmsnorm", "allowed: flash_attention, gemm_relu"),
    ('backend = "tritn"', "exclude[0].backend", "tritn", "allowed: tilelang, torch"),
    ('workload = "huge"', "exclude[0].workload", "huge", "allowed: b1_h2_s128_d64, square_4096, tiny_ragged"),
    ('dtype = "float8"', "exclude[0].dtype", "float8", "allowed: float16, float32"),
    ('variant = "tuned2"', "exclude[0].variant", "tuned2",
     "allowed: cpu, cudnn, default, efficient, fa3, fixed, flash, math, tile, tuned, ws"),
    ('kernel = "gemm_relu"\nworkload = "b1_h2_s128_d64"', "exclude[0].workload", "b1_h2_s128_d64",
     "for kernel 'gemm_relu'; allowed: square_4096, tiny_ragged"),
    ('kernel = "gemm_relu"\nbackend = "tilelang"\nvariant = "fixed"', "exclude[0].variant", "fixed",
     "for kernel 'gemm_relu' and backend 'tilelang'; allowed: cpu, tile, tuned"),
    ('backend = "torch"\nvariant = "tuned"', "exclude[0].variant", "tuned",
     "for backend 'torch'; allowed: cudnn, default, efficient, flash, math"),
    ('kernel = "gemm_relu"\nbackend = "torch"\nvariant = "math"', "exclude[0].variant", "math",
     "for kernel 'gemm_relu' and backend 'torch'; allowed: default"),
])
def test_excludes_must_name_what_the_matrix_runs(write_matrix, exclude, key, value, allowed):
    assert_refused(write_matrix(BASE + f"[[exclude]]\n{exclude}\n"), key, value, allowed)


@pytest.mark.parametrize("exclude", [
    'backend = "tilelang"\nvariant = "cpu"', 'variant = "fixed"', 'kernel = "flash_attention"\nvariant = "tuned"',
    'backend = "torch"\nvariant = "default"', 'device = "gpu"\ndtype = "float16"', 'workload = "tiny_ragged"',
])
def test_excludes_naming_real_things_pass(write_matrix, exclude):
    catalog.check(load_matrix(write_matrix(BASE + f"[[exclude]]\n{exclude}\n")))


def test_a_baseline_set_explicitly_must_be_a_backend_of_the_file(write_matrix):
    path = write_matrix(BASE + '[acceptance]\nbaseline = "triton"\n')
    assert_refused(path, "acceptance.baseline", "triton", "allowed: tilelang, torch")


def test_every_name_problem_is_listed_at_once(write_matrix):
    text = BASE.replace('cpu = ["tiny_ragged"]', 'cpu = ["huge"]')
    text = text.replace('nvidia = ["float16"]', 'nvidia = ["int64"]') + '[[exclude]]\nvariant = "nope"\n'
    assert len(refusal(write_matrix(text))) == 3


def probe_root(tmp_path, spec: str):
    (tmp_path / "kernels" / "probe").mkdir(parents=True)
    (tmp_path / "backends").mkdir()
    (tmp_path / "kernels" / "probe" / "spec.py").write_text(spec)
    (tmp_path / "backends" / "probe.py").write_text("")
    return tmp_path


PROBE = """
name = "p"
backends = ["probe"]
[run]
kernels_dir = "kernels"
backends_dir = "backends"
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
[[toolchain]]
name = "host"
system = true
[[kernel]]
name = "probe"
workloads = {{ cpu = ["small"] }}
dtypes = {{ cpu = ["{}"] }}
"""


def test_a_spec_without_declared_dtypes_allows_the_generic_float_types(tmp_path, write_matrix):
    probe_root(tmp_path, PROBE_SPEC)
    found = catalog.check(load_matrix(write_matrix(PROBE.format("float64"))))
    assert found.kernel("probe").dtypes == catalog.GENERIC_DTYPES and not found.kernel("probe").declared
    assert_refused(write_matrix(PROBE.format("int64"), "int.toml"), "kernel[0].dtypes.cpu[0]", "int64",
                   "declares no DTYPES", "allowed: float16, bfloat16, float32, float64")


def test_a_specs_input_kinds_are_checked_by_the_plan(tmp_path, write_matrix):
    """INPUT_KINDS and NONFINITE_KINDS as the judge reads them (opmatrix.incell.contents.input_kinds): refused before
    anything runs, naming the spec."""
    probe_root(tmp_path, PROBE_SPEC + 'INPUT_KINDS = ("normal",)\nNONFINITE_KINDS = ("masked",)\n')
    assert_refused(write_matrix(PROBE.format("float32")), "kernel[0].name", "probe",
                   "NONFINITE_KINDS names 'masked', which INPUT_KINDS (normal) does not declare")


def test_a_spec_that_fails_to_import_is_reported_on_its_kernel(tmp_path, write_matrix):
    probe_root(tmp_path, "import torch_that_is_not_here\n" + PROBE_SPEC)
    path = write_matrix(PROBE.format("float32"))
    assert_refused(path, "kernel[0].name", "probe", "failed to import", "ModuleNotFoundError",
                   "a spec imports no framework at module level")
    with pytest.raises(MatrixError) as refused:  # the kernel exists: it is never offered as an allowed name
        catalog.check(load_matrix(path))
    assert "allowed:" not in str(refused.value)


def test_a_missing_backends_folder_is_named(tmp_path, write_matrix):
    probe_root(tmp_path, PROBE_SPEC)
    path = write_matrix(PROBE.format("float32").replace('backends_dir = "backends"', 'backends_dir = "nowhere"'))
    assert_refused(path, "run.backends_dir", "nowhere", f"no such folder ({tmp_path / 'nowhere'})")
    assert_refused(path, "backends[0]", "probe", f"backend adapter in the project's {tmp_path / 'nowhere'}",
                   f"allowed: {SHIPPED_BACKENDS}")


def test_the_names_check_imports_no_framework():
    code = ("import sys; from opmatrix import catalog, paths; from opmatrix.matrix import load_matrix\n"
            "for p in paths.MATRICES.glob('*.toml'): catalog.check(load_matrix(p))\n"
            "print(sorted(m for m in ('torch', 'triton', 'tilelang', 'ray', 'pandas', 'nox') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "[]"


def test_plugin_files_that_do_not_parse_or_break_the_contract_are_refused_by_plan_with_file_and_line(tmp_path):
    """A syntax error in an implementation or a spec, a constant that is a typo of the contract's, a build of the
    wrong arity: `opmatrix plan` exits 2 naming the file and the line, the refused kernel never listed as allowed."""
    (tmp_path / "kernels" / "probe").mkdir(parents=True)
    (tmp_path / "backends").mkdir()
    (tmp_path / "kernels" / "probe" / "spec.py").write_text(PROBE_SPEC)
    files = {"broken": "import torch\n\ndef build(w, dtype, device, variant)\n    return None\n",
             "typo": "RETURN_OUTPUT = True\ndef build(w, dtype, device, variant):\n    return None\n",
             "arity": "def build(w, dtype):\n    return None\n"}
    for name, code in files.items():
        (tmp_path / "kernels" / "probe" / f"{name}.py").write_text(code)
        (tmp_path / "backends" / f"{name}.py").write_text("def available():\n    return '1'\n")
    head = BASE.replace('backends = ["torch", "tilelang"]', 'backends = ["broken", "typo", "arity"]')
    (tmp_path / "m.toml").write_text(head.split("[[kernel]]")[0] + '[[kernel]]\nname = "probe"\n'
                                     'workloads = { cpu = ["quick"] }\ndtypes = { cpu = ["float32"] }\n')
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-m", "opmatrix", "plan", "m.toml"], capture_output=True, text=True,
                         cwd=tmp_path, env=env)
    assert out.returncode == 2, out.stderr
    assert "kernels/probe/broken.py:3: expected ':'" in out.stderr and "fix that line" in out.stderr
    assert "unknown module constant RETURN_OUTPUT; did you mean RETURNS_OUTPUT?" in out.stderr
    assert "kernels/probe/arity.py:1: build takes 2 parameter(s)" in out.stderr
    assert "Traceback" not in out.stderr
    (tmp_path / "kernels" / "probe" / "spec.py").write_text("WORKLOADS = {\n")
    out = subprocess.run([sys.executable, "-m", "opmatrix", "plan", "m.toml"], capture_output=True, text=True,
                         cwd=tmp_path, env=env)
    assert out.returncode == 2 and "kernels/probe/spec.py:1:" in out.stderr, out.stderr
    assert "imports no framework" not in out.stderr and "allowed: " not in out.stderr.split("spec.py:1:")[1][:200]
