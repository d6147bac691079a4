"""What a cell's environment is installed with (opmatrix.cellenv.nox_session): pip's or uv's arguments for the
toolchain's packages; a vendor index that does not answer is left out with a warning instead of being retried for
every package (pip) or stopping the install (uv); uv resolves as pip does and is offered pip's local wheel folders.
The measurement behind it: reports/20261207-cpu-first-run/NOTES.md."""
import http.server
import socket
import threading

from opmatrix.cellenv import nox_session
from opmatrix.core.jobs import ToolchainSpec

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PINNED = ToolchainSpec(name="pinned", python="3.11", installer="uv", packages=("torch==2.13.0", "triton==3.9.0"),
                       index={"cpu": CPU_INDEX})


def answers(url):
    return None


def silent(url):
    return "[Errno -2] Name or service not known"


def test_an_index_that_answers_is_used_and_uv_resolves_as_pip_does():
    args, warning = nox_session._install_args(PINNED, "cpu", "uv", answers, environ={})
    assert args == ["torch==2.13.0", "triton==3.9.0", "--extra-index-url", CPU_INDEX,
                    "--index-strategy", "unsafe-best-match"]
    assert warning == ""
    args, _ = nox_session._install_args(PINNED, "cpu", "pip", answers, environ={})
    assert args == ["torch==2.13.0", "triton==3.9.0", "--extra-index-url", CPU_INDEX]  # pip knows no index strategy


def test_an_index_that_does_not_answer_is_left_out_with_a_warning():
    for installer in ("pip", "uv"):
        args, warning = nox_session._install_args(PINNED, "cpu", installer, silent, environ={})
        assert args == ["torch==2.13.0", "triton==3.9.0"]
        assert CPU_INDEX in warning and "does not answer" in warning and "Name or service not known" in warning
    args, warning = nox_session._install_args(PINNED, "nvidia", "uv", silent, environ={})  # no index for nvidia
    assert args == ["torch==2.13.0", "triton==3.9.0"] and warning == ""


def test_uv_is_offered_the_wheel_folders_pip_is_told_of(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    environ = {"PIP_FIND_LINKS": f"{wheels} /srv/more"}
    args, _ = nox_session._install_args(PINNED, "nvidia", "uv", answers, environ=environ)
    assert args == ["torch==2.13.0", "triton==3.9.0", "--find-links", str(wheels), "--find-links", "/srv/more"]
    args, _ = nox_session._install_args(PINNED, "nvidia", "pip", answers, environ=environ)
    assert args == ["torch==2.13.0", "triton==3.9.0"]  # pip reads PIP_FIND_LINKS itself
    own = ToolchainSpec(name="own", installer="uv", packages=("torch==2.13.0",), find_links=str(wheels))
    args, _ = nox_session._install_args(own, "cpu", "uv", answers, environ=environ)
    assert args == ["torch==2.13.0", "--find-links", str(wheels), "--find-links", "/srv/more"]  # once each


def test_a_toolchain_without_packages_installs_nothing_and_probes_nothing():
    host = ToolchainSpec(name="host", system=True, index={"cpu": CPU_INDEX})

    def probed(url):
        raise AssertionError("no install, no probe")
    assert nox_session._install_args(host, "cpu", "uv", probed, environ={}) == ([], "")


def test_the_probe_tells_an_answer_from_no_answer():
    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert nox_session.index_unreachable(f"http://127.0.0.1:{server.server_port}/simple/", timeout=5) is None
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as sock:  # a port nothing listens on: refused at once
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    why = nox_session.index_unreachable(f"http://127.0.0.1:{port}/simple/", timeout=5)
    assert why and "refused" in why.lower()
