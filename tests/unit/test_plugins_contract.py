"""Plugin files are checked when loaded (pluggy-style): signatures, constants, backend defaults, what `build` and
`compile_for` return. Every committed kernel and backend file passes the same check."""
import ast
import sys

import pytest

from opmatrix import kit, paths
from opmatrix.incell import plugins
from opmatrix.incell.plugins import Built, Compiled, PluginError
from tests.helpers import CPU, plugin_root

GPU = CPU.__class__("h200", "nvidia", "sm_90", "H200")
GOOD = "def build(workload, dtype, device, variant):\n    return lambda x, out: out.copy_(x * 2)\n"


def load_impl(tmp_path, code: str):
    plugin_root(tmp_path, {"impl": code})
    return plugins.load_impl(tmp_path / "kernels", "probe", "impl")


def load_backend(tmp_path, code: str):
    plugin_root(tmp_path, {"b": GOOD}, adapters={"b": code})
    return plugins.load_backend(tmp_path / "backends", "b")


def test_a_wrong_build_signature_is_refused_at_load_naming_file_and_contract(tmp_path):
    with pytest.raises(PluginError) as err:
        load_impl(tmp_path, "def build(w, dtype, device):\n    pass\n")
    text = str(err.value)
    assert "kernels/probe/impl.py" in text and "build(workload, dtype, device, variant)" in text
    assert "def build(workload, dtype, device, variant):" in text  # the fix


def test_parameter_names_are_free_their_number_is_not(tmp_path):
    assert load_impl(tmp_path, "def build(w, dt, dev, var):\n    pass\n").build
    with pytest.raises(PluginError, match=r"compile_for\(workload, dtype, device, variant\)"):
        load_impl(tmp_path / "x", GOOD + "def compile_for(w, dtype, device, variant, extra):\n    pass\n")


def test_an_unknown_constant_is_refused_naming_the_allowed_ones(tmp_path):
    with pytest.raises(PluginError) as err:
        load_impl(tmp_path, "RETURN_OUTPUT = True\n" + GOOD)
    text = str(err.value)
    assert "RETURN_OUTPUT" in text and "did you mean RETURNS_OUTPUT" in text
    assert "VARIANTS, RETURNS_OUTPUT" in text and "_RETURN_OUTPUT" in text  # allowed ones, and the private spelling


def test_private_and_imported_names_are_not_constants(tmp_path):
    code = "from math import pi as PI\n_BLOCK = 64\nVARIANTS = ('a', 'b')\nRETURNS_OUTPUT = False\n" + GOOD
    assert load_impl(tmp_path, code).VARIANTS == ("a", "b")


def test_a_constant_of_the_wrong_type_is_refused(tmp_path):
    with pytest.raises(PluginError, match="RETURNS_OUTPUT must be True or False, got 'yes'"):
        load_impl(tmp_path, "RETURNS_OUTPUT = 'yes'\n" + GOOD)


def test_a_near_miss_of_a_hook_name_is_refused(tmp_path):
    with pytest.raises(PluginError, match=r"compile_fro\(\) is not a kernel implementation hook; did you mean "
                                          r"compile_for\(workload, dtype, device, variant\)"):
        load_impl(tmp_path, GOOD + "def compile_fro(workload, dtype, device, variant):\n    pass\n")


def test_a_spec_hook_with_the_wrong_signature_is_refused(tmp_path):
    from tests.helpers import PROBE_SPEC

    broken = PROBE_SPEC.replace("def make_inputs(w, dtype, device, seed):", "def make_inputs(w, dtype, device):")
    plugin_root(tmp_path, {"impl": GOOD}, spec=broken)
    with pytest.raises(PluginError, match=r"make_inputs\(workload, dtype, device, seed\)"):
        plugins.load_spec(tmp_path / "kernels", "probe")


def test_a_backend_states_only_what_differs(tmp_path):
    backend = load_backend(tmp_path, "def available():\n    return '1.0'\n")
    assert backend.available() == "1.0"
    assert backend.covers(GPU) is None and backend.environment(GPU, tmp_path) == {}
    assert backend.timed(CPU) and backend.timed(GPU) and not backend.compiles_on_first_call


def test_timed_is_a_constant_or_a_per_device_hook(tmp_path):
    assert not load_backend(tmp_path / "a", "TIMED = False\ndef available(): return '1'\n").timed(GPU)
    hook = load_backend(tmp_path / "b", "def available(): return '1'\ndef timed(device): return device.is_gpu\n")
    assert hook.timed(GPU) and not hook.timed(CPU)
    with pytest.raises(PluginError, match="both TIMED and timed"):
        load_backend(tmp_path / "c", "TIMED = True\ndef available(): return '1'\ndef timed(device): return True\n")


def test_the_retired_timer_hook_is_refused_with_its_replacement(tmp_path):
    with pytest.raises(PluginError, match=r"timer\(\) is no longer part .* TIMED = False"):
        load_backend(tmp_path, "def available(): return '1'\ndef timer(device): return None\n")


def test_a_backend_answer_of_the_wrong_type_is_an_error_naming_the_file(tmp_path):
    backend = load_backend(tmp_path, "def available(): return '1'\ndef covers(device): return False\n"
                                     "def environment(device, cache_dir): return {'X': 1}\n")
    with pytest.raises(PluginError, match=r"backends/b.py: covers\(device\) must return None or a reason"):
        backend.covers(CPU)
    with pytest.raises(PluginError, match=r"environment\(device, cache_dir\) must return a dict of str -> str"):
        backend.environment(CPU, tmp_path)


def test_build_returns_built_and_a_bare_function_is_the_one_shorthand(tmp_path):
    fn = lambda x, out: None  # noqa: E731
    assert plugins.built_from(Built(fn, {"block": 64}, "warm"), tmp_path) == Built(fn, {"block": 64}, "warm")
    assert plugins.built_from(fn, tmp_path) == Built(fn)
    fn.config = {"block": 64}  # the retired style: metadata smuggled on the function
    with pytest.raises(PluginError, match=r"fn.config .* return opmatrix.kit.Built"):
        plugins.built_from(fn, tmp_path)
    with pytest.raises(PluginError, match="build returned dict"):
        plugins.built_from({"fn": fn}, tmp_path)


def test_compiled_takes_only_the_build_only_statuses():
    assert Compiled("lowers", "HIP source").config == {}
    with pytest.raises(ValueError, match="compiles, lowers"):
        Compiled("ok", "nothing")


def test_kit_is_what_plugin_files_import():
    assert (kit.Built, kit.Compiled, kit.Unsupported, kit.Unavailable, kit.require) == (
        plugins.Built, plugins.Compiled, plugins.Unsupported, plugins.Unavailable, plugins.require)


def test_an_implementation_reads_the_kernels_shared_constants_from_its_spec():
    spec = plugins.load_spec(paths.BUILTIN_KERNELS, "rmsnorm")
    assert kit.load_spec(str(paths.BUILTIN_KERNELS / "rmsnorm" / "torch.py")) is spec  # one module, checked once
    impl = plugins.load_impl(paths.BUILTIN_KERNELS, "rmsnorm", "triton")
    assert impl.spec is spec and not hasattr(impl, "EPS")


def test_every_committed_plugin_file_honours_its_contract():
    """Loading checks every file: no implementation redefines a spec constant such as EPS (an UPPER_CASE name
    outside the contract), every build has the contract's signature, every backend only states what differs."""
    for backend in sorted(paths.BUILTIN_BACKENDS.glob("*.py")):
        plugins.load_backend(paths.BUILTIN_BACKENDS, backend.stem)
    for kernel in sorted(p for p in paths.BUILTIN_KERNELS.iterdir() if (p / "spec.py").is_file()):
        plugins.load_spec(paths.BUILTIN_KERNELS, kernel.name)
        for impl in sorted(kernel.glob("*.py")):
            if impl.name != "spec.py":
                plugins.load_impl(paths.BUILTIN_KERNELS, kernel.name, impl.stem)


def test_in_cell_code_imports_only_the_standard_library_at_module_level():
    """The worker, the plugin loader and the kit run inside cell environments that hold nothing but the kernel's
    framework: at import they may use the standard library and each other, nothing else (torch arrives lazily)."""
    offenders = []
    for path in sorted((paths.ROOT / "opmatrix").glob("*/*.py")):
        if path.parent.name not in ("incell", "kit", "core"):
            continue
        for node in ast.parse(path.read_text()).body:
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}: {n}" for n in names
                          if n.split(".")[0] not in sys.stdlib_module_names
                          and not n.startswith(("opmatrix.core", "opmatrix.incell", "opmatrix.kit"))]
    assert offenders == []
