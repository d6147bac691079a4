"""Helper of the tests of docs/quickstart.md (test_quickstart.py, in tests/unit and tests/cells): the files the page
shows, read from it (a line naming the file in backticks, then its fenced block), written into a project folder as a
user following the page would."""
import re

from opmatrix import paths

PAGE = paths.PACKAGE.parent / "docs" / "quickstart.md"
FILES = {"kernels/axpy/spec.py", "kernels/axpy/torch.py", "kernels/axpy/torch_compile.py", "matrix/mine.toml"}


def quickstart_files() -> dict[str, str]:
    """The files docs/quickstart.md shows: a line naming the file in backticks, then its fenced block."""
    text = PAGE.read_text(encoding="utf-8")
    return {m.group(1): m.group(2) for m in re.finditer(r"^`([\w/.]+\.(?:py|toml))`[^\n]*\n+```\w+\n(.*?)^```", text,
                                                        re.S | re.M)}


def write_project(root):
    """The page's files under root (kernels/axpy/..., matrix/mine.toml); returns the matrix's path."""
    files = quickstart_files()
    assert set(files) == FILES
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root / "matrix" / "mine.toml"
