"""docs/quickstart.md as a user follows it, for real: its files, exactly as the page shows them
(tests/quickstart_page.py), plan and run in a real cell on this CPU and reach a verdict for each kernel (keep
framework or adopt, never "no verdict"). Its plan and install lines without a run: tests/unit/test_quickstart.py."""
import json

import pytest

from opmatrix import cli
from tests.quickstart_page import write_project


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
