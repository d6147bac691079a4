"""A reports folder that cannot take results: `opmatrix run` must refuse with a clear error and exit 2 before any
work starts (no cell planned into scratch, no environment built), not fail at the first result and lose it.

Read-only and full folders are real mounts (a tmpfs, read-only or filled to the last byte) made inside a private
mount namespace of the command alone (`unshare -m`), so nothing outside it ever sees them and nothing needs
unmounting; where this machine does not allow that, those cases are skipped and say why.
"""
from __future__ import annotations

import shutil
import subprocess

import pytest

from opmatrix import paths
from tests.faults import plugins
from tests.faults.harness import REPO, cli_env, opmatrix, opmatrix_cmd

MOUNTS = {
    "read-only": ("mount -t tmpfs -o ro,size=1m opmatrix-faults {dir}", "Read-only file system"),
    "full": ("mount -t tmpfs -o size=64k opmatrix-faults {dir} && "
             "{{ head -c 1048576 /dev/zero > {dir}/filler 2>/dev/null || true; }}", "No space left on device"),
}


def private_mounts_work() -> str:
    """'' when `unshare -m` and a tmpfs mount work here, else why not."""
    if not shutil.which("unshare"):
        return "no unshare command"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k x /mnt"], capture_output=True,
                           text=True)
    return "" if probe.returncode == 0 else f"no private tmpfs mount here: {probe.stderr.strip()}"


def refuse_check(out: subprocess.CompletedProcess, run_id: str, reason: str) -> str:
    """What the refusal looked like, in the summary's words."""
    before_work = not (paths.SCRATCH / run_id).exists()
    clear = "cannot write the run folder" in out.stderr and reason in out.stderr and "Traceback" not in out.stderr
    return f"exit {out.returncode}" + (", clear" if clear else ", unclear") + (", before work" if before_work else "")


EXPECTED = "exit 2, clear, before work"


def test_a_file_where_the_reports_folder_should_be(tmp_path, run_id, observe):
    matrix = plugins.plain_matrix(tmp_path)
    blocker = tmp_path / "reports"
    blocker.write_text("not a folder")
    out = opmatrix("run", matrix, "--no-ray", "--run-id", run_id, "--reports", blocker)
    observe("reports path is a file", EXPECTED, refuse_check(out, run_id, "Not a directory"))
    assert out.returncode == 2, out.stderr
    assert f"cannot write the run folder {blocker / run_id}: Not a directory" in out.stderr
    assert "--reports" in out.stderr and "Traceback" not in out.stderr
    assert not (paths.SCRATCH / run_id).exists()


@pytest.mark.parametrize("kind", sorted(MOUNTS))
def test_a_read_only_or_full_reports_folder(kind, tmp_path, run_id, observe):
    why = private_mounts_work()
    if why:
        pytest.skip(why)
    matrix = plugins.plain_matrix(tmp_path)
    reports = tmp_path / "mounted"
    reports.mkdir()
    setup, reason = MOUNTS[kind]
    command = opmatrix_cmd("run", matrix, "--no-ray", "--run-id", run_id, "--reports", reports)
    out = subprocess.run(["unshare", "-m", "sh", "-c", setup.format(dir=reports) + ' && exec "$@"', "sh", *command],
                         capture_output=True, text=True, cwd=REPO, env=cli_env(), timeout=120)
    observe(f"reports folder {kind}", EXPECTED, refuse_check(out, run_id, reason))
    assert out.returncode == 2, out.stderr
    assert f"cannot write the run folder {reports / run_id}: {reason}" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (paths.SCRATCH / run_id).exists()
