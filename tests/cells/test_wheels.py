"""`opmatrix wheels` for real: pip downloads a toolchain's pins with their dependencies for this machine's Python,
less what the host is said to have; `python3 -m opmatrix.wheelhouse` (stdlib only) turns the archive back into
wheels; a fresh virtual environment installs from them with no index. What is decided without the network:
tests/unit/test_wheels.py."""
import json
import subprocess
import sys
import venv

import pytest

from opmatrix import cli, paths

MATRIX = """
name = "offline"
backends = ["torch"]
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
[[toolchain]]
name = "host"
system = true
packages = ["pydantic"]
[[kernel]]
name = "rmsnorm"
workloads = { cpu = ["ragged_1000"] }
dtypes = { cpu = ["float32"] }
"""


@pytest.mark.integration  # pip and the package index, a fresh virtual environment
def test_a_toolchains_packages_travel_as_one_archive_and_install_with_no_index(tmp_path, capsys):
    (tmp_path / "m.toml").write_text(MATRIX)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    archive = tmp_path / "carry.tar.xz"
    code = cli.main(["wheels", str(tmp_path / "m.toml"), "--python", python, "--deps", "--host-has",
                     "typing-extensions", "--out", str(archive), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    made = json.loads(out.out)
    names = {w.split("-")[0].lower() for w in made["wheels"]}
    assert {"pydantic", "pydantic_core", "annotated_types"} <= names, names
    assert "typing_extensions" not in names  # the host has it
    assert made["archive_bytes"] < made["wheel_bytes"] < made["unpacked_bytes"], made

    folder = tmp_path / "wheels"
    unpacked = subprocess.run([sys.executable, "-S", "-m", "opmatrix.wheelhouse", str(archive), str(folder)],
                              capture_output=True, text=True, cwd=paths.PACKAGE.parent)
    assert unpacked.returncode == 0, unpacked.stderr
    env = tmp_path / "env"
    venv.create(env, with_pip=True, system_site_packages=False)
    python_env = str(env / "bin" / "python")
    # the host has typing-extensions (from the index here, as the image would have it), and no index for the rest
    subprocess.run([python_env, "-m", "pip", "install", "--quiet", "typing-extensions"], check=True)
    pip = [python_env, "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(folder)]
    installed = subprocess.run(pip + ["pydantic"], capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr[-2000:]
    imported = subprocess.run([python_env, "-c", "import pydantic; print(pydantic.VERSION)"],
                              capture_output=True, text=True)
    assert imported.returncode == 0 and imported.stdout.strip() in " ".join(made["wheels"]), imported
