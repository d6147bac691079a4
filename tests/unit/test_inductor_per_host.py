"""What torch.compile learns and builds once per host (opmatrix.kit.inductor_isa, opmatrix.kit.inductor_header),
when the host's folder cannot serve: a cache root that cannot be made leaves the ISA probe and the precompiled
header to the job, with no error; a header build that fails says why in the host's folder and is not tried again;
and kit.scoped_env puts a variable back as it was. The host's folder serving two real jobs:
tests/cells/test_inductor_per_host.py."""
import os

import pytest

from opmatrix.incell import host_cache
from opmatrix.kit import inductor_header, inductor_isa, scoped_env


def test_a_host_folder_that_cannot_be_made_leaves_the_probe_to_the_job(tmp_path, monkeypatch):
    """A cache root that is a file (a read-only or odd home): nothing detected here, inductor's folder untouched,
    no error; the job's build probes in its own folder as before."""
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(host_cache.ROOT_ENV, str(tmp_path / "file"))
    monkeypatch.setenv(inductor_isa.CACHE_ENV, str(tmp_path / "job"))
    assert inductor_isa.detect() == []
    assert os.environ[inductor_isa.CACHE_ENV] == str(tmp_path / "job")


def test_a_host_folder_that_cannot_be_made_leaves_the_header_to_the_job(tmp_path, monkeypatch):
    """The same for the precompiled header: nothing is linked, no error; the job's build precompiles its own."""
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(host_cache.ROOT_ENV, str(tmp_path / "file"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "job-tmp"))
    assert inductor_header.prepare() == []
    assert not (tmp_path / "job-tmp").exists()


@pytest.mark.parametrize("before", [None, "the job's folder"])
def test_a_scoped_variable_is_put_back_as_it_was(monkeypatch, before):
    """kit.scoped_env.variable, which the probe and the TileLang helpers set their compilers' variables with: set
    within the block, then restored, or removed when it was unset, also when the block raises."""
    name = "OPMATRIX_TEST_SCOPED"
    if before is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, before)
    with pytest.raises(RuntimeError), scoped_env.variable(name, "inside"):
        assert os.environ[name] == "inside"
        raise RuntimeError
    assert os.environ.get(name) == before


def test_a_header_build_that_fails_says_why_in_the_hosts_folder_and_is_not_tried_again(tmp_path, monkeypatch):
    """The host's build makes no header (here its process exits with an error): prepare links nothing, no error,
    the reason is kept beside where the header would be, and the next job does not pay a second attempt."""
    monkeypatch.setenv(host_cache.ROOT_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(inductor_header, "WARM_UP", "import sys; sys.exit('no C++ compiler today')")
    tried, build = [], inductor_header._build
    monkeypatch.setattr(inductor_header, "_build", lambda host: (tried.append(host), build(host)))
    assert inductor_header.prepare() == [] and inductor_header.prepare() == []
    assert len(tried) == 1
    (failed,) = host_cache.folder(inductor_header.FOLDER).glob(f"*/{inductor_header.FAILED}")
    assert "exit 1" in failed.read_text() and "no C++ compiler today" in failed.read_text()
