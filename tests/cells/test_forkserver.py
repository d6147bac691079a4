"""The fork server: workers forked from a process that imported torch once are still one process per job, each
in its own process group, with the environment the runner gives it, and a crash, a kill or a hang is still that
worker's alone, reported with the same exit codes as a worker started as a new interpreter."""
import os
import signal
import subprocess
import sys

import pytest

from opmatrix.incell.forkserver import ForkServer
from opmatrix.incell.servers import Server, ServerGone
from tests.helpers import job_row, plugin_root, worker_task

pytestmark = pytest.mark.integration

IMPLS = {
    "good": """
        def build(w, dtype, device, variant):
            import os
            marker = os.environ["OPMATRIX_TEST_MARKER"]  # the runner's environment, not the server's
            def fn(x, out):
                out.copy_(x * 2)
            fn.marker = marker
            return fn
    """,
    "segfault": """
        def build(w, dtype, device, variant):
            import ctypes
            ctypes.string_at(0)
    """,
    "hang": """
        def build(w, dtype, device, variant):
            import time
            time.sleep(600)
    """,
}


@pytest.fixture(scope="module")
def forks(tmp_path_factory):
    root = tmp_path_factory.mktemp("forks")
    server = ForkServer.start(str(root), root / "forkserver.log")
    assert server is not None, (root / "forkserver.log").read_text()
    yield root, server
    server.close()


def start(forks, backend: str, **env) -> Server:
    root, server = forks
    plugin_root(root, IMPLS)
    task, folder = worker_task(root, backend)
    return Server(task, folder, dict(os.environ, **env), forks=server)


def test_a_forked_worker_runs_the_job_in_its_own_process_group(forks, monkeypatch):
    worker = start(forks, "good", OPMATRIX_TEST_MARKER="from-the-runner")
    _, server = forks
    assert worker.proc.pid != server.proc.pid and os.getpgid(worker.proc.pid) == worker.proc.pid
    assert worker.expect("loaded", 60)["backend_version"]
    worker.finish(60)
    assert worker.proc.returncode == 0
    monkeypatch.setenv("OPMATRIX_TEST_MARKER", "from-the-runner")
    row = job_row(forks[0], "good", forks=server)
    assert row.status == "ok" and row.trials == 3, row.error


def test_a_crash_is_the_workers_own_and_reported_like_a_subprocess(forks):
    worker = start(forks, "segfault")
    worker.expect("loaded", 60)
    worker.phase = "build"
    with pytest.raises(ServerGone) as gone:
        worker.request({"op": "build"}, "built", 60)
    assert gone.value.row.status == "crashed" and "SIGSEGV" in gone.value.row.error
    assert worker.proc.returncode == -signal.SIGSEGV
    good = start(forks, "good", OPMATRIX_TEST_MARKER="after-a-crash")  # the server itself lives on
    assert good.expect("loaded", 60)
    good.request({"op": "build"}, "built", 60)
    good.finish(60)


def test_a_hung_worker_is_killed_with_its_group(forks):
    worker = start(forks, "hang")
    worker.expect("loaded", 60)
    worker.channel.send({"op": "build"})
    with pytest.raises(subprocess.TimeoutExpired):
        worker.proc.wait(timeout=2)
    worker.kill()
    assert worker.proc.returncode == -signal.SIGKILL
    with pytest.raises(ProcessLookupError):
        os.killpg(worker.proc.pid, 0)


def test_it_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("OPMATRIX_FORKSERVER", "0")
    assert ForkServer.start(str(tmp_path), tmp_path / "log") is None


def test_the_cell_probe_is_forked_from_the_server_and_other_modules_are_refused(forks):
    """The cell's probe (facts and ceilings) is forked like a worker, so a cell imports torch once; the server
    runs only the modules it is meant for."""
    import json

    from opmatrix.incell.cell_runner import _forked

    root, server = forks
    out = root / "cell_probe.json"
    assert _forked(server, "cell_probe", [str(out), "cpu", "0", "float32"], dict(os.environ), root / "cell_probe.log")
    measured = json.loads(out.read_text())
    assert measured["facts"]["torch"] and measured["facts"]["runtime"] == "cpu"
    assert measured["ceilings"]["tflops"]["float32"] > 0 and measured["ceilings"]["copy_gbps"] > 0
    with open(root / "refused.log", "wb") as log:
        assert server.spawn(["x"], dict(os.environ), log.fileno(), log.fileno(), main="os") is None


def test_a_server_started_in_another_environment_forks_workers_that_import_from_it(tmp_path):
    """A [[compare]]'s candidate toolchain gets its own server (cell_runner: python and env of that toolchain):
    its workers import what that environment's path holds, which the runner's own environment does not."""
    site = tmp_path / "candidate-site"
    site.mkdir()
    (site / "opmatrix_candidate_pin.py").write_text("VERSION = '2.0'\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    server = ForkServer.start(str(tmp_path), tmp_path / "forkserver.log", sys.executable, env)
    assert server is not None, (tmp_path / "forkserver.log").read_text()
    try:
        plugin_root(tmp_path, {"pinned": """
            def build(w, dtype, device, variant):
                import opmatrix_candidate_pin
                assert opmatrix_candidate_pin.VERSION == "2.0"
                return lambda x, out: out.copy_(x * 2)
        """})
        task, folder = worker_task(tmp_path, "pinned")
        worker = Server(task, folder, dict(os.environ), sys.executable, server)  # the runner's env: no such module
        assert worker.proc.pid != server.proc.pid
        worker.expect("loaded", 60)
        worker.request({"op": "build"}, "built", 60)
        worker.finish(60)
        # the same job started as a new interpreter in the runner's own environment cannot import it
        task, folder = worker_task(tmp_path, "pinned")
        plain = Server(task, folder, dict(os.environ), sys.executable)
        plain.expect("loaded", 60)
        with pytest.raises(ServerGone) as gone:
            plain.request({"op": "build"}, "built", 60)
        assert "opmatrix_candidate_pin" in gone.value.row.error + plain.log_tail()
    finally:
        server.close()
