"""The docs: the generated reference keeps up with the code, links resolve, the README stays a page (the
quickstart's own project: tests/unit/test_quickstart.py, tests/cells/test_quickstart.py)."""
import re
import subprocess
import sys
import typing

from opmatrix import cli, docs_reference, matrix, paths
from opmatrix.core import status
from opmatrix.incell import contract

DOCS = paths.PACKAGE.parent / "docs"
README = paths.PACKAGE.parent / "README.md"


def test_the_committed_reference_is_what_the_code_generates():
    stale = docs_reference.lagging(DOCS / "reference")
    assert not stale, (f"docs/reference/{', '.join(stale)} lag the code: run `python -m opmatrix.docs_reference` "
                       "and commit the result")


def test_a_reference_that_lags_is_named(tmp_path):
    for name, text in docs_reference.pages().items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert docs_reference.lagging(tmp_path) == []
    cli_md = tmp_path / "cli.md"
    cli_md.write_text(cli_md.read_text(encoding="utf-8").replace("`--deadline-s", "`--deadline", 1), encoding="utf-8")
    (tmp_path / "plugins.md").unlink()
    assert docs_reference.lagging(tmp_path) == ["plugins.md", "cli.md"]
    out = subprocess.run([sys.executable, "-m", "opmatrix.docs_reference", "--check", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "cli.md: lags the code" in out.stderr


def _models(model) -> list:
    """The matrix model and every model nested in it."""
    found = [model]
    for field in model.model_fields.values():
        for inner in (field.annotation, *typing.get_args(field.annotation)):
            if isinstance(inner, type) and issubclass(inner, matrix.BaseModel) and inner not in found:
                found += _models(inner)
    return found


def test_every_matrix_key_contract_name_subcommand_and_status_is_in_the_reference():
    pages = docs_reference.pages()
    for model in _models(matrix.Matrix):
        for name in model.model_fields:
            if name != "source":
                assert f"| `{name}` |" in pages["matrix.md"], f"{model.__name__}.{name}"
    for rules in (contract.SPEC, contract.IMPL, contract.BACKEND):
        for hook in rules.hooks:
            assert f"`{hook.signature}`" in pages["plugins.md"]
        for constant in rules.constants or ():
            assert f"`{constant.name}`" in pages["plugins.md"]
    for name, sub in docs_reference._subparsers(cli.parser()):
        assert f"## `opmatrix {name}`" in pages["cli.md"]
        for action in sub._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in pages["cli.md"], f"opmatrix {name} {flag}"
    for name in status.ALL:
        assert f"| `{name}` |" in pages["cli.md"]
    # defaults are the model's, written as TOML writes them
    assert "| `min_speedup` | float | `1.05` |" in pages["matrix.md"]
    assert "| `compile_only` | bool | `true` |" in pages["matrix.md"]


def test_the_reference_depends_on_nothing_but_the_code():
    text = "".join(docs_reference.pages().values())
    assert str(paths.ROOT) not in text, "an absolute path leaked into the reference"


LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def test_links_in_the_readme_and_docs_resolve():
    broken = []
    for page in [README, *sorted(DOCS.rglob("*.md"))]:
        for target, _ in LINK.findall(page.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(paths.PACKAGE.parent)} -> {target}")
    assert not broken, "links to missing files: " + "; ".join(broken)


def test_the_readme_is_a_page():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; teaching belongs in docs/, figures in docs/results.md"


def test_help_texts_read_in_the_reference_as_help_prints_them():
    """argparse formats help with `%` (`1 %%` prints `1 %`): the reference shows the printed text, never the source."""
    page = docs_reference.pages()["cli.md"]
    assert "%%" not in page and "%(" not in page
    assert "while an interval straddles a 1 % gain" in page
    out = subprocess.run([sys.executable, "-m", "opmatrix", "validate", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert "1 % gain" in " ".join(out.stdout.split()) and "%%" not in out.stdout


def test_a_specs_dtypes_are_documented_where_its_other_names_are():
    """DTYPES (what dtypes a matrix may name for the kernel) is read by plan: the reference and the guide say so."""
    assert "| `DTYPES` | constant: the dtype names the kernel is defined for" in docs_reference.pages()["plugins.md"]
    guide = (DOCS / "writing-kernels-and-backends.md").read_text(encoding="utf-8")
    assert "\nDTYPES = (" in guide.split("## A kernel")[1].split("## A backend adapter")[0]


def test_a_specs_input_kinds_are_documented_where_its_other_names_are():
    """INPUT_KINDS and NONFINITE_KINDS are read by the judge (and checked by plan): the reference and the guide say
    so, and the guide says how make_inputs learns the kind."""
    page = docs_reference.pages()["plugins.md"]
    assert "| `INPUT_KINDS` | constant: the kinds of inputs make_inputs makes" in page
    assert "| `NONFINITE_KINDS` | constant: the kinds of INPUT_KINDS whose inputs hold inf or NaN" in page
    kernel = (DOCS / "writing-kernels-and-backends.md").read_text(encoding="utf-8").split("## A kernel")[1]
    assert "\nINPUT_KINDS = (" in kernel and "\nNONFINITE_KINDS = (" in kernel and 'w.get("inputs", "normal")' in kernel
