"""docs/quickstart.md as a user follows it, without a run: its files, exactly as the page shows them
(tests/quickstart_page.py: a line naming the file in backticks, then its fenced block, so an edit of the page is
what is tested), plan beside the built-in kernels, and its install lines give the cell a CPU torch. The same files
run in a real cell and reach a verdict for each kernel: tests/cells/test_quickstart.py."""
import json
import re

from opmatrix import cli
from tests.quickstart_page import PAGE, quickstart_files, write_project


def quickstart_commands() -> list[str]:
    """The shell lines of the page's bash blocks, comments cut."""
    text = PAGE.read_text(encoding="utf-8")
    return [line.split("  #")[0].strip() for block in re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M)
            for line in block.splitlines() if line.strip()]


def test_the_quickstart_project_plans_beside_the_built_in_kernels(tmp_path, capsys):
    matrix = write_project(tmp_path)
    assert cli.main(["plan", str(matrix), "--json"]) == 0
    cells = json.loads(capsys.readouterr().out)
    jobs = {(j["kernel"], j["backend"]) for c in cells for j in c["jobs"]}
    assert jobs == {("axpy", "torch"), ("axpy", "torch-compile"), ("gemm_relu", "torch"),
                    ("gemm_relu", "torch-compile")}


def test_the_install_lines_bring_a_cpu_torch_and_the_commands_are_the_ones_tested():
    commands = quickstart_commands()
    torch = [c for c in commands if c.startswith("pip install torch")]
    # the CPU build: PyPI's Linux torch is the CUDA one; pinned, so that a newer CUDA build on PyPI never wins
    assert torch == ["pip install torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu"]
    assert "pip install git+<this repository>" in commands
    assert "mkdir -p myproject/matrix myproject/kernels/axpy && cd myproject" in commands
    assert {"opmatrix plan matrix/mine.toml", "opmatrix run matrix/mine.toml"} <= set(commands)
    matrix = quickstart_files()["matrix/mine.toml"]
    assert "system = true" in matrix  # the toolchain gets torch from the environment the install lines fill
