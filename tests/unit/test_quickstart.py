"""docs/quickstart.md as a user follows it: its files, exactly as the page shows them, plan and run on this CPU and
reach a verdict for each kernel (keep framework or adopt, never "no verdict"), and its install lines give the cell
a CPU torch. The files are read from the page (a line naming the file in backticks, then its fenced block), so an
edit of the page is what is tested."""
import json
import re

import pytest

from opmatrix import cli, paths

PAGE = paths.PACKAGE.parent / "docs" / "quickstart.md"
FILES = {"kernels/axpy/spec.py", "kernels/axpy/torch.py", "kernels/axpy/torch_compile.py", "matrix/mine.toml"}


def quickstart_files() -> dict[str, str]:
    """The files docs/quickstart.md shows: a line naming the file in backticks, then its fenced block."""
    text = PAGE.read_text(encoding="utf-8")
    return {m.group(1): m.group(2) for m in re.finditer(r"^`([\w/.]+\.(?:py|toml))`[^\n]*\n+```\w+\n(.*?)^```", text,
                                                        re.S | re.M)}


def quickstart_commands() -> list[str]:
    """The shell lines of the page's bash blocks, comments cut."""
    text = PAGE.read_text(encoding="utf-8")
    return [line.split("  #")[0].strip() for block in re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M)
            for line in block.splitlines() if line.strip()]


def write_project(root):
    files = quickstart_files()
    assert set(files) == FILES
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root / "matrix" / "mine.toml"


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


@pytest.mark.integration  # a real cell: torch and torch.compile built, checked and timed on this CPU
def test_the_quickstart_runs_and_reaches_a_verdict_for_each_kernel(tmp_path, capsys, monkeypatch):
    matrix = write_project(tmp_path)
    monkeypatch.chdir(tmp_path)  # `cd myproject`
    assert cli.main(["plan", "matrix/mine.toml"]) == 0
    capsys.readouterr()
    code = cli.main(["run", "matrix/mine.toml", "--no-ray", "--reports", str(tmp_path / "reports"),
                     "--run-id", "quickstart"])
    err = capsys.readouterr().err
    assert code == 0, err
    verdicts = json.loads((tmp_path / "reports" / "quickstart" / "verdicts.json").read_text())
    got = {v["kernel"]: v["verdict"] for v in verdicts}
    assert set(got) == {"axpy", "gemm_relu"}, got
    for kernel, verdict in got.items():
        assert verdict.startswith(("keep framework", "adopt")), f"{kernel}: {verdict}\n{err}"
    assert matrix.is_file()
