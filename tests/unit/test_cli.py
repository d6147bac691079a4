"""The command line: machine-readable output, clear errors with exit code 2 (before anything runs or is
written), help with examples, host resources for `ray start`."""
import json
import os
import subprocess
import sys

import pytest

from opmatrix import paths
from opmatrix.scheduling import resources
from opmatrix.scheduling.hosts import HostDevice


def opmatrix(*args):
    return subprocess.run([sys.executable, "-m", "opmatrix", *args], capture_output=True, text=True,
                          cwd=paths.ROOT, timeout=120)


def test_plan_json_lists_cells_and_jobs():
    out = opmatrix("plan", "--json")
    assert out.returncode == 0, out.stderr
    cells = {c["cell"]: c for c in json.loads(out.stdout)}
    assert {"cpu.pinned", "h200.pinned", "mi300x.pinned", "local-gpu.host"} <= set(cells)
    job = cells["cpu.pinned"]["jobs"][0]
    assert set(job) == {"kernel", "workload", "dtype", "backend", "variant", "timeout_s", "rival", "from"}


def test_bad_matrix_exits_2_with_the_reason(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('backends = ["torch"]\n[[device]]\nid = "x"\nvendor = "intel"\narch = "a"\n')
    out = opmatrix("plan", str(bad))
    assert out.returncode == 2
    assert f"opmatrix: {bad}" in out.stderr and "device[0].vendor" in out.stderr
    assert "Traceback" not in out.stderr


def test_host_resources_advertise_this_hosts_devices():
    out = opmatrix("host-resources", "--json")
    data = json.loads(out.stdout)
    cpu = [name for name in data["resources"] if name.startswith("opmatrix.cpu.")]
    assert len(cpu) == 1 and data["resources"][cpu[0]] == 1.0
    assert opmatrix("host-resources").stdout.startswith("'--resources={")


def test_resource_names_round_trip_to_host_devices():
    h200 = HostDevice("nvidia", "", "NVIDIA H200", "sm_90")
    mi300 = HostDevice("amd", "", "AMD Instinct MI300X", "gfx942")
    cpu = HostDevice("cpu", "", "Intel(R) Xeon(R) Processor", "x86_64")
    assert resources.host_resources([cpu, h200, h200]) == {
        "opmatrix.cpu.x86_64.Intel-R-Xeon-R-Processor": 1.0, "opmatrix.gpu.nvidia.sm_90.NVIDIA-H200": 2.0,
        "opmatrix.host": 1.0}
    assert resources.parse_resource(resources.resource_name(h200)) == h200
    assert resources.parse_resource(resources.resource_name(mi300)) == mi300
    assert resources.parse_resource(resources.resource_name(cpu)).arch == "x86_64"
    assert resources.parse_resource("CPU") is None
    assert "--num-gpus=2" in resources.ray_start_args([cpu, h200, h200])


def test_version_and_every_subcommand_help_has_a_description_and_an_example(capsys):
    from opmatrix import __version__, cli

    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"opmatrix {__version__}"
    for command in ("run", "compare", "deployments", "report", "plan", "hosts", "host-resources", "profile",
                    "history"):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        text = capsys.readouterr().out
        description = text.split("\n\n")[1]
        assert description.strip() and "\n" not in description.strip(), (command, description)
        assert "example:\n  " in text and "opmatrix " in text.split("example:")[1], command


def test_plan_reads_a_project_matrix_from_any_working_directory(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(paths.ROOT))
    for name in ("matrix/h200x2.toml", str(paths.MATRICES / "h200x2.toml")):
        out = subprocess.run([sys.executable, "-m", "opmatrix", "plan", name, "--json"], capture_output=True,
                             text=True, cwd=tmp_path, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        assert [c["cell"] for c in json.loads(out.stdout)] == ["h200.host-a", "h200.host-b"]


def test_report_refuses_a_folder_without_results(tmp_path, capsys):
    from opmatrix import cli

    folder = tmp_path / "not-a-run"
    folder.mkdir()
    assert cli.main(["report", str(folder), "--reports", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(folder) in err and "no results.jsonl" in err
    assert list(folder.iterdir()) == []  # nothing written into it


def test_resume_of_an_unknown_run_refuses_instead_of_starting_afresh(tmp_path, capsys):
    from opmatrix import cli

    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "results.jsonl").write_text("")
    code = cli.main(["run", "matrix/h200x2.toml", "--no-ray", "--reports", str(tmp_path), "--run-id", "r2",
                     "--resume"])
    err = capsys.readouterr().err
    assert code == 2 and "no run 'r2'" in err and str(tmp_path) in err and "runs there: r1" in err
    assert not (tmp_path / "r2").exists()


def test_redo_needs_resume_and_defaults_to_lost_with_it(tmp_path, capsys):
    from opmatrix import cli
    from opmatrix.commands.run import redo

    code = cli.main(["run", "--no-ray", "--reports", str(tmp_path), "--run-id", "r1", "--redo", "crashed"])
    assert code == 2 and "--redo crashed" in capsys.readouterr().err and not (tmp_path / "r1").exists()
    assert redo(cli.parser().parse_args(["run", "--resume", "--run-id", "r1"])) == {"lost"}
    assert redo(cli.parser().parse_args(["run", "--resume", "--run-id", "r1", "--redo", "lost,crashed"])) == {
        "lost", "crashed"}
