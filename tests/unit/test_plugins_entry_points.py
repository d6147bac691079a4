"""Where kernels and backends come from (opmatrix.incell.plugins.Registry): the ones shipped with opmatrix, those
installed packages register through the entry point groups opmatrix.kernels / opmatrix.backends, and the
project's own folders, which win by name. The installed packages here are real distributions on sys.path (a
dist-info folder with entry_points.txt, as pip writes it), found by importlib.metadata."""
import textwrap

import pytest

from opmatrix import catalog, paths, plan
from opmatrix.incell import plugins
from opmatrix.incell.plugins import PluginError
from opmatrix.matrix import MatrixError, load_matrix
from tests.helpers import PROBE_SPEC, probe_adapter

ADAPTER = probe_adapter()
IMPL = "def build(workload, dtype, device, variant):\n    return lambda x, out: out.copy_(x * 2)\n"


def install(site, dist: str, files: dict[str, str], backends: dict[str, str] = {}, kernels: dict[str, str] = {}):
    """A distribution `dist` 0.1 under `site`: its files and a dist-info naming the entry points."""
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    groups = {plugins.BACKEND_GROUP: backends, plugins.KERNEL_GROUP: kernels}
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) for group, eps in groups.items() if eps))


@pytest.fixture
def site(tmp_path, monkeypatch):
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def registry(project=None):
    return plugins.discover(paths.BUILTIN_KERNELS, paths.BUILTIN_BACKENDS,
                            project and project / "kernels", project and project / "backends")


def matrix(root, backends, kernel="rmsnorm", workload="tiny_ragged"):
    path = root / "m.toml"
    path.write_text(textwrap.dedent(f"""
        name = "ep"
        backends = {backends!r}
        [[device]]
        id = "cpu"
        vendor = "cpu"
        arch = "auto"
        [[toolchain]]
        name = "host"
        system = true
        [[kernel]]
        name = "{kernel}"
        workloads = {{ cpu = ["{workload}"] }}
        dtypes = {{ cpu = ["float32"] }}
        """).replace("'", '"'))
    return load_matrix(path)


def test_the_shipped_plugins_are_found_without_a_project():
    found = registry()
    assert {"torch", "torch-compile", "triton", "tilelang"} <= set(found.backends())
    assert {"rmsnorm", "flash_attention"} <= set(found.kernels())
    assert found.kernel("rmsnorm").origin == plugins.SHIPPED
    assert found.backend_dir("torch-compile") == paths.BUILTIN_BACKENDS


def test_in_a_checkout_the_projects_folders_are_the_shipped_ones_listed_once(tmp_path):
    """A checkout is itself a project: its kernels/ and backends/ are the built-in ones. Named as the project's too
    (the CLI, a matrix under matrix/), they are one source: no name twice, no override of itself, nothing to say."""
    assert (paths.KERNELS, paths.BACKENDS) == (paths.BUILTIN_KERNELS, paths.BUILTIN_BACKENDS)
    found = plugins.discover(paths.BUILTIN_KERNELS, paths.BUILTIN_BACKENDS, paths.KERNELS, paths.BACKENDS)
    assert found.kernels() == registry().kernels() and found.backends() == registry().backends()
    for name in found.kernels():
        assert found.kernel(name).origin == plugins.SHIPPED
    for name in found.backends():
        assert found.backend(name).origin == plugins.SHIPPED and found.backend_dir(name) == paths.BUILTIN_BACKENDS
    assert found.origins(found.kernels(), found.backends()) == []
    assert "project" not in found.searched("kernel") and str(paths.BUILTIN_KERNELS) in found.searched("kernel")
    link = tmp_path / "kernels"  # the same folder by another path is still the same folder
    link.symlink_to(paths.BUILTIN_KERNELS, target_is_directory=True)
    assert plugins.discover(paths.BUILTIN_KERNELS, paths.BUILTIN_BACKENDS, link).kernel("rmsnorm").origin == \
        plugins.SHIPPED
    m = load_matrix(paths.DEFAULT_MATRIX)  # a matrix of the checkout finds kernels/ above it: the shipped folder
    assert m.kernels_dir() == paths.BUILTIN_KERNELS and plan.plugin_lines(m) == []


def test_an_installed_packages_backend_and_kernel_are_discovered_and_run_through_the_loaders(site):
    install(site, "acme-opmatrix", {"acme_ops/__init__.py": "", "acme_ops/acme.py": ADAPTER,
                                    "acme_ops/scale/__init__.py": "", "acme_ops/scale/spec.py": PROBE_SPEC,
                                    "acme_ops/scale/acme.py": IMPL},
            backends={"acme": "acme_ops.acme"}, kernels={"scale": "acme_ops.scale"})
    found = registry()
    backend, kernel = found.backend("acme"), found.kernel("scale")
    assert backend.origin == "entry point acme = acme_ops.acme (acme-opmatrix 0.1)"
    assert backend.path == site / "acme_ops" / "acme.py" and kernel.path == site / "acme_ops" / "scale"
    assert plugins.load_backend(found.backend_dir("acme"), "acme").available()  # the host's torch version
    assert plugins.load_impl(found.kernel_dir("scale"), "scale", "acme").build


def test_the_projects_own_file_overrides_a_shipped_one_and_plan_says_so(tmp_path):
    (tmp_path / "backends").mkdir()
    (tmp_path / "backends" / "torch.py").write_text(ADAPTER)
    m = matrix(tmp_path, ["torch", "torch-compile"])
    assert m.plugins().backend("torch").origin == plugins.PROJECT
    assert m.plugins().backend_dir("torch-compile") == paths.BUILTIN_BACKENDS  # the others still shipped
    lines = plan.plugin_lines(m)
    assert lines == [f"backend torch: project {tmp_path / 'backends' / 'torch.py'}, overriding shipped "
                     f"{paths.BUILTIN_BACKENDS / 'torch.py'}"]
    assert plan.cell_plans(m, "r", tmp_path)[0].backend_dirs == {"torch": str(tmp_path / "backends"),
                                                                 "torch-compile": str(paths.BUILTIN_BACKENDS)}


def test_an_entry_point_clashing_with_a_shipped_backend_is_refused_naming_both(site, tmp_path):
    install(site, "rogue", {"rogue/__init__.py": "", "rogue/torch.py": ADAPTER}, backends={"torch": "rogue.torch"})
    with pytest.raises(PluginError) as err:
        registry().backend("torch")
    text = str(err.value)
    assert "backend 'torch' is provided 2 times" in text
    assert "entry point torch = rogue.torch (rogue 0.1)" in text and str(site / "rogue" / "torch.py") in text
    assert f"shipped: {paths.BUILTIN_BACKENDS / 'torch.py'}" in text
    assert "uninstall or rename one, or put the one to use in the project's backends/torch.py" in text
    with pytest.raises(MatrixError, match=r"backends\[0\] = 'torch': backend 'torch' is provided 2 times"):
        catalog.check(matrix(tmp_path, ["torch"]))
    (tmp_path / "backends").mkdir()
    (tmp_path / "backends" / "torch.py").write_text(ADAPTER)  # the project's choice settles it
    assert registry(tmp_path).backend("torch").origin == plugins.PROJECT


def test_two_packages_registering_one_kernel_clash(site):
    for dist in ("one", "two"):
        install(site, dist, {f"{dist}/__init__.py": "", f"{dist}/scale/__init__.py": "",
                             f"{dist}/scale/spec.py": PROBE_SPEC}, kernels={"scale": f"{dist}.scale"})
    with pytest.raises(PluginError, match=r"kernel 'scale' is provided 2 times .*entry point scale = one\.scale "
                                          r"\(one 0\.1\).*entry point scale = two\.scale \(two 0\.1\)"):
        registry().kernel("scale")


@pytest.mark.parametrize("target, files, why", [
    ("gone.acme", {}, "gone.acme cannot be found in this environment"),
    ("misnamed.adapter", {"misnamed/__init__.py": "", "misnamed/adapter.py": ADAPTER},
     "a backend entry point names a module whose file is named like the backend (acme.py)"),
    ("obj.acme:thing", {"obj/__init__.py": "", "obj/acme.py": ADAPTER}, "names an object (thing)"),
])
def test_a_broken_backend_entry_point_is_named_when_used(site, tmp_path, target, files, why):
    install(site, "broken", files, backends={"acme": target})
    found = registry()
    assert "acme" in found.backends()  # listed, so that a matrix naming it gets this reason, not "unknown"
    with pytest.raises(PluginError) as err:
        found.backend("acme")
    assert f"opmatrix.backends entry point acme = {target} (broken 0.1)" in str(err.value) and why in str(err.value)
    assert "torch" in found.backends() and found.backend("torch").origin == plugins.SHIPPED  # the rest unharmed


def test_an_entry_point_backend_breaking_the_contract_is_refused_by_the_names_check(site, tmp_path):
    install(site, "sloppy", {"sloppy/__init__.py": "", "sloppy/acme.py": "def availble():\n    return '1'\n"},
            backends={"acme": "sloppy.acme"})
    with pytest.raises(MatrixError) as err:
        catalog.check(matrix(tmp_path, ["torch", "acme"]))
    assert f"backends[1] = 'acme': {site / 'sloppy' / 'acme.py'}" in str(err.value)
    assert "available()" in str(err.value)


def test_a_kernel_entry_point_must_name_a_folder_called_like_the_kernel(site):
    install(site, "odd", {"odd/__init__.py": "", "odd/other/__init__.py": "", "odd/other/spec.py": PROBE_SPEC},
            kernels={"scale": "odd.other"})
    with pytest.raises(PluginError, match=r"a kernel entry point names a folder called like the kernel \(scale/\)"):
        registry().kernel("scale")
