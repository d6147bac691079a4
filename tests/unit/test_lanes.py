"""The suite's lanes are its folders (issue 45 §7): every test module lives in one lane folder of tests/, and its
markers agree with the folder. unit/: pure, in-process tests, never `integration` or `golden` (the statistical
calibrations among them keep their `slow`): `nox -s unit` runs `pytest tests/unit -m "not slow"`. cells/: real worker
processes, nox cell environments or Ray, every test `integration`. golden/: the committed reports rebuilt from their
stored rows, every test `golden`. faults/ and adversarial/: the fault-injection and adversarial suites, integration
too (tests/faults/conftest.py marks its folder; adversarial/ says so in each module). Helpers stay beside
tests/helpers.py, the data in tests/data/ and tests/gpu_tools/.

The markers are read from the source with `ast` (decorators, module and class `pytestmark`), so a test put in the
wrong folder fails here without anything being run or collected."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from tests import conftest
from tests.helpers import REPO, TESTS

# lane folder -> (markers every test must carry, markers no test may carry)
LANES: dict[str, tuple[set[str], set[str]]] = {
    "unit": (set(), {"integration", "golden"}),
    "cells": ({"integration"}, set()),
    "golden": ({"golden"}, set()),
    "faults": (set(), set()),  # every test marked integration by tests/faults/conftest.py at collection
    "adversarial": ({"integration"}, set()),
}


def _mark(node: ast.AST) -> str | None:
    """`pytest.mark.NAME`, `pytest.mark.NAME(...)` or `mark.NAME`: NAME; anything else: None."""
    if isinstance(node, ast.Call):
        node = node.func
    if not isinstance(node, ast.Attribute):
        return None
    owner = node.value
    if (isinstance(owner, ast.Attribute) and owner.attr == "mark") or (isinstance(owner, ast.Name)
                                                                       and owner.id == "mark"):
        return node.attr
    return None


def _pytestmark(body: list[ast.stmt]) -> set[str]:
    """The markers a `pytestmark = ...` in this body (a module's or a class's) applies: one mark or a list of them."""
    found = set()
    for stmt in body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
            stmt, ast.AnnAssign) and stmt.value is not None else []
        if any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets):
            values = stmt.value.elts if isinstance(stmt.value, (ast.List, ast.Tuple)) else [stmt.value]
            found |= {name for value in values if (name := _mark(value))}
    return found


def _decorated(node: ast.AST) -> tuple[set[str], set[str]]:
    """(the markers a node's decorators apply to it whole, every marker named anywhere in them: a
    pytest.param(..., marks=...) of one case too)."""
    decorators = getattr(node, "decorator_list", [])
    whole = {name for d in decorators if (name := _mark(d))}
    anywhere = {name for d in decorators for sub in ast.walk(d) if (name := _mark(sub))}
    return whole, anywhere


def marks_of_tests(path: Path) -> dict[str, tuple[set[str], set[str]]]:
    """Each test of a module (test_* functions, test_* methods of Test* classes) with (the markers it carries whole,
    every marker named for it or for one of its cases)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    module = _pytestmark(tree.body)
    found = {}
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in tree.body:
        if isinstance(node, functions) and node.name.startswith("test"):
            whole, anywhere = _decorated(node)
            found[node.name] = (module | whole, module | anywhere)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            cls_whole, cls_anywhere = _decorated(node)
            cls_whole |= _pytestmark(node.body) | module
            for method in node.body:
                if isinstance(method, functions) and method.name.startswith("test"):
                    whole, anywhere = _decorated(method)
                    found[f"{node.name}::{method.name}"] = (cls_whole | whole,
                                                            cls_whole | cls_anywhere | anywhere | module)
    return found


def _test_modules(root: Path) -> list[Path]:
    return sorted(root.rglob("test_*.py"))


def test_every_test_module_lives_in_a_lane_folder():
    modules = _test_modules(TESTS)
    assert modules
    astray = [str(p.relative_to(REPO)) for p in modules if p.relative_to(TESTS).parts[0] not in LANES]
    assert not astray, f"test modules outside the lane folders {sorted(LANES)} of tests/: {astray}"
    for lane in LANES:
        assert (TESTS / lane / "__init__.py").is_file(), f"tests/{lane} is a package, as tests/ is"


def test_each_lanes_tests_carry_its_markers_and_none_of_another_lanes():
    """unit/: no integration or golden, not even on one case; cells/: integration; golden/: golden."""
    wrong = []
    for path in _test_modules(TESTS):
        required, forbidden = LANES.get(path.relative_to(TESTS).parts[0], (set(), set()))
        for test, (whole, anywhere) in marks_of_tests(path).items():
            where = f"{path.relative_to(REPO)}::{test}"
            wrong += [f"{where}: not marked {name}" for name in sorted(required - whole)]
            wrong += [f"{where}: marked {name}" for name in sorted(forbidden & anywhere)]
    assert not wrong, ("tests in a lane folder whose markers say another lane (move the test, with what it needs, "
                       "into the other folder's module of the same name):\n  " + "\n  ".join(wrong))


def test_the_files_the_suite_starts_first_exist():
    """tests/conftest.py's LONGEST_FIRST names files by path: a file moved or split leaves no stale name behind."""
    missing = [name for name in conftest.LONGEST_FIRST if not (REPO / name).is_file()]
    assert not missing, missing


def test_the_test_paths_the_docs_name_exist():
    """README.md, docs/ (less docs/reference/, which opmatrix.docs_reference writes), noxfile.py and .ci/run name test
    files and folders by path: a module moved to another lane leaves none of them pointing at nothing."""
    pages = [REPO / "README.md", REPO / "noxfile.py", REPO / ".ci" / "run",
             *(p for p in sorted((REPO / "docs").rglob("*.md")) if "reference" not in p.relative_to(REPO).parts)]
    named = {(page.relative_to(REPO), path) for page in pages
             for path in re.findall(r"\btests/[\w/.-]*\w", page.read_text(encoding="utf-8"))}
    assert len(named) > 10
    missing = sorted(f"{page}: {path}" for page, path in named if not (REPO / path).exists())
    assert not missing, missing


def test_the_marker_reader_sees_every_form(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "import pytest\nfrom pytest import mark\n"
        "pytestmark = [pytest.mark.usefixtures('x'), pytest.mark.integration]\n"
        "def test_plain(): pass\n"
        "@pytest.mark.slow\n@pytest.mark.skipif(True, reason='r')\ndef test_decorated(): pass\n"
        "@mark.golden\ndef test_bare_mark(): pass\n"
        "@pytest.mark.parametrize('x', [1, pytest.param(2, marks=pytest.mark.golden)])\ndef test_one_case(x): pass\n"
        "@pytest.mark.timeout(5)\nclass TestGroup:\n    pytestmark = pytest.mark.golden\n"
        "    def test_method(self): pass\n    def helper(self): pass\n"
        "def helper(): pass\n", encoding="utf-8")
    found = marks_of_tests(probe)
    both = {"integration", "usefixtures"}
    assert found == {
        "test_plain": (both, both),
        "test_decorated": (both | {"slow", "skipif"}, both | {"slow", "skipif"}),
        "test_bare_mark": (both | {"golden"}, both | {"golden"}),
        "test_one_case": (both | {"parametrize"}, both | {"parametrize", "golden"}),
        "TestGroup::test_method": (both | {"timeout", "golden"}, both | {"timeout", "golden"}),
    }
    probe.write_text("pytestmark = pytest.mark.integration  # worker processes\ndef test_x(): pass\n")
    assert marks_of_tests(probe) == {"test_x": ({"integration"}, {"integration"})}
