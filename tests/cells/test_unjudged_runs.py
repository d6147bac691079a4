"""A run that judged nothing says so and exits 5 (issue 45): a framework baseline not installed in a cell's
environment names the cell, its nox session and toolchain, and the package to add; a run whose jobs ran yet
reached no verdict says that too. Real cells through `opmatrix run --no-ray` on the probe kernel. Where exit 5 is
documented: tests/unit/test_unjudged_runs.py."""
import pytest

from opmatrix import cli
from tests.helpers import probe_adapter, probe_matrix, write_plugins

GOOD = "def build(w, dtype, device, variant):\n    return lambda x, out: out.copy_(x * 2)\n"
NO_TORCH = ("from opmatrix.kit import Unavailable\n\ndef available():\n    raise Unavailable(\"torch is not importable in "
            "this environment: No module named 'torch'\")\n")


@pytest.mark.integration  # a real cell
def test_a_baseline_not_installed_fails_the_run_naming_the_environment_and_the_fix(tmp_path, capsys):
    write_plugins(tmp_path, "probe", {"torch": GOOD, "fast": GOOD}, probe_adapter())
    (tmp_path / "backends" / "torch.py").write_text(NO_TORCH)
    matrix = probe_matrix(tmp_path, "nobase", ["torch", "fast"], ["quick"], timeout_s=60, rep_ms=5)
    code = cli.main(["run", str(matrix), "--no-ray", "--reports", str(tmp_path / "reports"), "--run-id", "nobase"])
    err = capsys.readouterr().err
    assert code == 5, err
    assert "the baseline torch is not installed in the environment of cell cpu.host (nox session cell-cpu-host-" in err
    assert "toolchain 'host'" in err and "No module named 'torch'" in err
    assert "system = true" in err and 'packages = ["torch==VERSION"]' in err  # the fix for this toolchain
    assert "no verdict: " in err and "exit 5: nothing was judged" in err


@pytest.mark.integration  # a real cell
def test_a_run_that_judged_what_it_ran_exits_0(tmp_path, capsys):
    write_plugins(tmp_path, "probe", {"torch": GOOD, "fast": GOOD}, probe_adapter())
    matrix = probe_matrix(tmp_path, "judged", ["torch", "fast"], ["quick"], timeout_s=60, rep_ms=5)
    code = cli.main(["run", str(matrix), "--no-ray", "--reports", str(tmp_path / "reports"), "--run-id", "judged"])
    err = capsys.readouterr().err
    assert code == 0 and "no verdict" not in err and "not installed" not in err, err


@pytest.mark.integration  # a real cell
def test_a_compile_only_run_whose_contestants_refuse_the_device_exits_0(tmp_path, capsys):
    """A device no host has (compile-only): the baseline has no compile-only build (no_host), the contestant's
    compile_for refuses the device (unsupported). Nothing ran on a host, so nothing was meant to be judged: exit 0,
    where matrix/gfx942-builds.toml's run first exited 5."""
    refuses = GOOD + ("\ndef compile_for(w, dtype, device, variant):\n    from opmatrix.kit import Unsupported\n"
                      "    raise Unsupported('written for another device')\n")
    write_plugins(tmp_path, "probe", {"torch": GOOD, "fast": refuses}, probe_adapter())
    matrix = probe_matrix(tmp_path, "aot", ["torch", "fast"], ["quick"], timeout_s=60, rep_ms=5)
    text = matrix.read_text().replace('id = "cpu"\nvendor = "cpu"\narch = "auto"',
                                      'id = "mi300x"\nvendor = "amd"\narch = "gfx942"')
    matrix.write_text(text.replace("cpu = ", "amd = "))
    code = cli.main(["run", str(matrix), "--no-ray", "--reports", str(tmp_path / "reports"), "--run-id", "aot"])
    err = capsys.readouterr().err
    assert code == 0 and "no verdict" not in err, err
    rows = (tmp_path / "reports" / "aot" / "results.jsonl").read_text()
    assert '"status": "unsupported"' in rows and '"status": "no_host"' in rows, rows
