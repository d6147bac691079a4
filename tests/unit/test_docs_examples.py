"""The files docs/writing-kernels-and-backends.md shows as its library example (a line naming the file in backticks,
then its fenced block) are the repository's own, as they are: an edit of either without the other fails here."""
import re

from opmatrix import paths

ROOT = paths.PACKAGE.parent
PAGE = ROOT / "docs" / "writing-kernels-and-backends.md"


def shown_files(text: str) -> dict[str, str]:
    """{path: the fenced block after a line that is that path in backticks and a colon}."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^`([\w/.]+\.py)`:\n+```python\n(.*?)^```", text,
                                                        re.S | re.M)}


def test_the_library_example_is_the_shipped_flashinfer_adapter_and_kernel():
    shown = shown_files(PAGE.read_text(encoding="utf-8"))
    assert set(shown) == {"backends/flashinfer.py", "kernels/rmsnorm/flashinfer.py"}, sorted(shown)
    for name, block in shown.items():
        assert block.rstrip() == (ROOT / name).read_text(encoding="utf-8").rstrip(), f"{name} differs from the page"


def test_a_file_edited_without_the_page_is_seen():
    text = "`kernels/x/y.py`:\n\n```python\nA = 1\n```\n"
    assert shown_files(text) == {"kernels/x/y.py": "A = 1\n"}
    assert shown_files(text)["kernels/x/y.py"].rstrip() != "A = 2"
