"""Exit 5, a run that judged nothing (issue 45), is documented where a user looks: the README's exit codes and the
generated CLI reference, with the code `opmatrix run` returns. The runs that exit 5 or 0, in real cells:
tests/cells/test_unjudged_runs.py."""
from opmatrix import docs_reference, paths
from opmatrix.commands.run import NOTHING_JUDGED


def test_exit_5_is_documented_in_the_readme_and_the_cli_reference():
    readme = (paths.PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    assert "`5` no row failed, yet nothing was judged" in " ".join(readme.split())
    assert "5 no row failed, yet the run judged nothing" in docs_reference.pages()["cli.md"]
    assert NOTHING_JUDGED == 5
