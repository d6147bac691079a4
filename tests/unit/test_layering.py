"""Imports run one way: the import graph of opmatrix/, read from the source, follows the declared layers and has
no cycle, between modules or between packages (opmatrix.<name>).

The checkout is itself an example project: matrix/, kernels/, backends/, reports/, tests/, noxfile.py and
pyproject.toml at its top level, the built-in kernels and backend adapters being its kernels/ and backends/ (the
wheel maps them into the package: opmatrix.paths). Those plugin files are loaded by path, never imported by
opmatrix/, and import from opmatrix only its plugin API, opmatrix.kit. No module of tests/ imports a test module
(tests/**/test_*.py, in the lane folders: tests/unit/test_lanes.py): what test modules share lives in
tests/conftest.py, tests/helpers.py and helper modules beside it.

The graph is built with `ast` from every module under opmatrix/, lazy (function-level) imports included: a lazy
import is still a dependency, it only moves the moment it is paid. Imports under `if TYPE_CHECKING:` are left out
(they never run). A module may import from its own layer and the layers below it; anything else is named here
with the importing file and line. docs/layout.md describes the layers in words.
"""
from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

from opmatrix import paths

# Lowest first. A name is a top-level module or package of opmatrix (opmatrix.<name>); "" is opmatrix/__init__.py.
LAYERS = (
    ("core", {"core", "paths", "interrupts"}),
    ("in-cell", {"incell", "kit"}),
    ("driver", {"", "matrix_checks", "matrix_workloads", "matrix", "catalog", "plan", "manifest", "store", "cellenv",
                "scheduling", "mdtable", "sites", "wheelhouse"}),
    ("decide", {"decide"}),
    ("upgrade", {"upgrade"}),
    ("report", {"report", "progress"}),  # report.build: a run's report from its store, for `run` and `report`
    ("engine", {"run", "profile", "validate"}),  # a matrix run end to end; a model step profiled, kernels swapped in
    ("commands", {"cli", "commands", "docs_reference", "__main__"}),  # the verbs, one module each, over the library
)
DECLARED = {name: i for i, (_, names) in enumerate(LAYERS) for name in names}

# Imports still breaking the order or closing a cycle, each with the reason it is allowed for now. An entry that
# no longer matches an import fails the test below: remove it with the fix.
KNOWN: dict[tuple[str, str], str] = {
}


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int

    def where(self) -> str:
        return f"{self.importer.replace('.', '/')}.py:{self.line}"


def _modules() -> dict[str, Path]:
    root = paths.PACKAGE
    found = {}
    for path in root.rglob("*.py"):
        parts = ["opmatrix", *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _plugin_files() -> dict[str, Path]:
    """The built-in plugin files, named as the loaders do not (kernels.rmsnorm.triton, backends.torch): only for
    the messages below."""
    return {".".join(path.relative_to(paths.CHECKOUT).with_suffix("").parts): path
            for folder in (paths.BUILTIN_KERNELS, paths.BUILTIN_BACKENDS) for path in sorted(folder.rglob("*.py"))}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """Every opmatrix module `name` imports, resolved to the module (or package) that exists."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for other in child.orelse:
                    visit_node(other)
                continue
            visit_node(child)

    def visit_node(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                full = f"{module}.{alias.name}"  # `from opmatrix.report import markdown`: a module
                found.append((full if full in modules else module, node.lineno))
        else:
            visit(node)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    out = []
    for target, line in found:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target.split(".")[0] == "opmatrix" and target != name:
            out.append(Import(name, target, line))
    return out


@functools.lru_cache(maxsize=1)
def graph() -> tuple[Import, ...]:
    modules = _modules()
    return tuple(imp for name, path in sorted(modules.items()) for imp in _imports(name, path, modules))


def top(module: str) -> str:
    """opmatrix.report.html.page -> report; opmatrix -> ""."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _inferred() -> dict[str, int]:
    """A name no layer declares sits just where its own imports put it: the highest layer it imports from (a new
    stdlib-only module is core). Declare it in LAYERS to pin it."""
    imports = graph()
    names = {top(imp.importer) for imp in imports} | {top(imp.imported) for imp in imports}
    levels = {name: DECLARED.get(name, 0) for name in names}
    for _ in range(len(names)):  # a fixpoint: undeclared names importing undeclared names
        for imp in imports:
            name = top(imp.importer)
            if name not in DECLARED:
                levels[name] = max(levels[name], levels[top(imp.imported)])
    return levels


def layer(module: str, levels: dict[str, int] | None = None) -> int:
    return DECLARED[top(module)] if top(module) in DECLARED else (levels or _inferred()).get(top(module), 0)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan), each sorted, in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return sorted(found)


def _live(imports) -> list[Import]:
    return [imp for imp in imports if (imp.importer, imp.imported) not in KNOWN]


def test_imports_follow_the_declared_layers():
    levels = _inferred()
    broken = [f"{imp.where()}: {imp.importer} ({LAYERS[layer(imp.importer, levels)][0]}) imports {imp.imported} "
              f"({LAYERS[layer(imp.imported, levels)][0]})" for imp in _live(graph())
              if layer(imp.imported, levels) > layer(imp.importer, levels)]
    assert not broken, ("imports that run against the layers (move the shared piece down, or declare a new module's "
                        "layer in LAYERS):\n  " + "\n  ".join(broken))


def test_no_import_cycle_between_modules():
    edges: dict[str, set[str]] = {}
    for imp in _live(graph()):
        edges.setdefault(imp.importer, set()).add(imp.imported)
    assert _cycles(edges) == [], "modules that import each other: " + "; ".join(
        " <-> ".join(c) for c in _cycles(edges))


def test_no_import_cycle_between_packages():
    edges: dict[str, set[str]] = {}
    lines: dict[tuple[str, str], str] = {}
    for imp in _live(graph()):
        a, b = top(imp.importer) or "opmatrix", top(imp.imported) or "opmatrix"
        if a != b:
            edges.setdefault(a, set()).add(b)
            lines.setdefault((a, b), imp.where())
    cycles = _cycles(edges)
    assert cycles == [], "packages that reach each other: " + "; ".join(
        " <-> ".join(c) + " (" + ", ".join(f"{a}->{b} at {lines[a, b]}" for a in c for b in c if (a, b) in lines) + ")"
        for c in cycles)


def test_known_exceptions_still_exist():
    """An exception whose import is gone must leave the list, so the list says what is still wrong."""
    present = {(imp.importer, imp.imported) for imp in graph()}
    assert [edge for edge in KNOWN if edge not in present] == []


def test_a_run_report_is_built_by_the_report_layer_and_only_the_verbs_start_a_run():
    """One home each: a run's report (finish, decided) is built in opmatrix.report.build, which `run`, `report` and
    the tools reach without going through the run; opmatrix.run is the run itself, imported by verbs alone; every
    subcommand is a module of opmatrix.commands."""
    modules = _modules()
    builders = sorted(f"{name}.{node.name}" for name, path in modules.items()
                      for node in ast.parse(path.read_text(encoding="utf-8")).body
                      if isinstance(node, ast.FunctionDef) and node.name in ("finish", "decided"))
    assert builders == ["opmatrix.report.build.decided", "opmatrix.report.build.finish"]
    importers = sorted({imp.importer for imp in graph() if imp.imported == "opmatrix.run"})
    assert importers and all(top(name) == "commands" for name in importers), importers
    from opmatrix import cli, docs_reference

    assert {command.__name__.rpartition(".")[0] for command in cli.COMMANDS} == {"opmatrix.commands"}
    verbs = [name for name, _ in docs_reference._subparsers(cli.parser())]
    assert verbs == [command.__name__.rpartition(".")[2].replace("_", "-") for command in cli.COMMANDS]


def test_the_checker_sees_lazy_imports_and_skips_type_only_ones(tmp_path):
    source = ("from __future__ import annotations\nfrom typing import TYPE_CHECKING\n"
              "from opmatrix.core import status\nif TYPE_CHECKING:\n    from opmatrix.run import run\n"
              "def f():\n    from opmatrix.report import markdown\n    from . import keys\n")
    path = tmp_path / "probe.py"
    path.write_text(source, encoding="utf-8")
    modules = _modules()
    found = {imp.imported: imp.line for imp in _imports("opmatrix.core.probe", path, modules)}
    assert found == {"opmatrix.core.status": 3, "opmatrix.report.markdown": 7, "opmatrix.core.keys": 8}
    assert layer("opmatrix.report.markdown") > layer("opmatrix.core.probe")
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_checkout_is_a_project_whose_kernels_and_backends_are_the_built_in_ones():
    root = paths.CHECKOUT
    assert root is not None, "the tests run from a checkout"
    for name in ("matrix", "kernels", "backends", "reports", "tests"):
        assert (root / name).is_dir(), name
    for name in ("noxfile.py", "pyproject.toml", "matrix/default.toml"):
        assert (root / name).is_file(), name
    assert (paths.BUILTIN_KERNELS, paths.BUILTIN_BACKENDS) == (root / "kernels", root / "backends")
    assert (paths.KERNELS, paths.BACKENDS) == (paths.BUILTIN_KERNELS, paths.BUILTIN_BACKENDS)  # the same folders
    assert not (paths.PACKAGE / "builtin").exists()  # one copy: the wheel's builtin/ is made from the top level
    assert list(paths.BUILTIN_KERNELS.glob("*/spec.py")) and list(paths.BUILTIN_BACKENDS.glob("*.py"))


def test_built_in_plugins_import_only_the_plugin_api_and_nothing_imports_them():
    modules = _modules()
    broken = [f"{path.relative_to(paths.CHECKOUT)}:{imp.line}: imports {imp.imported}"
              for name, path in _plugin_files().items() for imp in _imports(name, path, modules)
              if imp.imported != "opmatrix.kit" and not imp.imported.startswith("opmatrix.kit.")]
    assert not broken, "plugin files import opmatrix.kit only:\n  " + "\n  ".join(broken)
    importers = []
    for name, path in sorted(modules.items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            named = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            importers += [f"{path.relative_to(paths.PACKAGE)}:{node.lineno}: {n}" for n in named
                          if n.split(".")[0] in ("kernels", "backends") or n.startswith("opmatrix.builtin")]
    assert not importers, f"plugin files are loaded by path (opmatrix.incell.plugins), never imported: {importers}"


def _imported_test_modules(path: Path, root: Path) -> list[tuple[int, str]]:
    """The test modules (a name test_* under tests/) that the file at `path`, under `root`, imports: (line, dotted
    name), relative imports resolved against the file's own package. A name test_* imported from a module of tests/
    counts too: if it is a function rather than a module, pytest would collect it a second time."""
    package = path.parent.relative_to(root).parts
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name.split(".") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = list(package[:len(package) - node.level + 1]) if node.level else []
            module = base + (node.module.split(".") if node.module else [])
            names = [module] + [module + [alias.name] for alias in node.names]
        else:
            continue
        found += [(node.lineno, ".".join(parts)) for parts in names
                  if parts[:1] == ["tests"] and parts[-1].startswith("test_")]
    return sorted(set(found))


def test_no_module_of_the_tests_imports_a_test_module():
    """Fixtures and helpers two test modules share live in tests/conftest.py, tests/helpers.py or a helper module
    beside it whose name does not start with test_ (helpers_ray.py, report_pages.py, bisect_project.py, ...). A test
    module imported by another ties the two: its module-level setup and fixtures come along, a test_* name imported
    is collected again, and neither file can change or move alone."""
    root = paths.CHECKOUT
    broken = [f"{path.relative_to(root)}:{line}: imports {name}"
              for path in sorted((root / "tests").rglob("*.py")) for line, name in _imported_test_modules(path, root)]
    assert not broken, ("test modules import another test module (move what they share into tests/helpers.py or a "
                        "helper module beside it):\n  " + "\n  ".join(broken))


def test_the_test_module_check_sees_every_form_of_import(tmp_path):
    (tmp_path / "tests" / "faults").mkdir(parents=True)
    probe = tmp_path / "tests" / "faults" / "test_probe.py"
    probe.write_text("import os\nimport tests.test_a\nfrom tests.test_b import x\nfrom tests import test_c, helpers\n"
                     "from tests.faults.test_d import y\nfrom .test_e import z\nfrom . import test_f, harness\n"
                     "from ..test_g import w\nfrom .. import test_h\nfrom tests.helpers import REPO\n"
                     "from tests.faults.harness import EARLY\nfrom .harness import EARLY\nimport tests.helpers_ray\n"
                     "def f():\n    from tests.adversarial.test_i import v\n", encoding="utf-8")
    assert _imported_test_modules(probe, tmp_path) == [
        (2, "tests.test_a"), (3, "tests.test_b"), (4, "tests.test_c"), (5, "tests.faults.test_d"),
        (6, "tests.faults.test_e"), (7, "tests.faults.test_f"), (8, "tests.test_g"), (9, "tests.test_h"),
        (15, "tests.adversarial.test_i")]


LONGEST_FUNCTION = 50  # lines, its signature and docstring included: one screen, one job


def long_functions(root: Path) -> list[str]:
    """Every function or method under `root` longer than LONGEST_FUNCTION lines, as "file:line name (lines)"."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > LONGEST_FUNCTION:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_of_the_engine_is_longer_than_a_screen():
    assert long_functions(paths.PACKAGE) == []


def test_the_length_check_sees_a_long_method(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    body = "\n".join(f"        x{i} = {i}" for i in range(LONGEST_FUNCTION))
    (package / "mod.py").write_text(f"class C:\n    def long(self):\n{body}\n\n    def short(self):\n        pass\n")
    assert long_functions(package) == [f"pkg/mod.py:2 long ({LONGEST_FUNCTION + 1} lines)"]
