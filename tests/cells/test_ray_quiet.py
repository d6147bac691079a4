"""Ray stays out of the user's way (issue 45): an embedded run's Ray prints none of its own warnings or notices
(token authentication, "Started a local Ray instance") unless asked for (OPMATRIX_RAY_VERBOSE=1, run --verbose),
and writes no token under $HOME, yet its cluster authenticates and runs tasks."""
import os
import subprocess
import sys

import pytest

from opmatrix import paths

pytestmark = pytest.mark.integration  # starts an embedded Ray

PROBE = """
import os, ray
from opmatrix.scheduling.ray_cluster import RayScheduler

@ray.remote
def where():
    return os.environ.get("RAY_AUTH_MODE")

with RayScheduler():
    print("TASK", ray.get(where.remote()))
"""


def _probe(tmp_path, **env):
    home = tmp_path / "home"
    home.mkdir()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k != "OPMATRIX_RAY_VERBOSE"}
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300,
                         env={**clean, "HOME": str(home), "PYTHONPATH": str(paths.PACKAGE.parent), **env})
    assert out.returncode == 0, out.stderr[-3000:]
    return out, sorted(str(p.relative_to(home)) for p in home.rglob("*"))


def test_an_embedded_ray_is_quiet_and_leaves_no_token_in_home(tmp_path):
    out, written = _probe(tmp_path)
    assert "TASK token" in out.stdout  # authenticated with the run's own token
    assert written == [], written  # nothing under $HOME (Ray wrote ~/.ray/auth_token)
    assert "WARNING" not in out.stderr and "Token authentication" not in out.stderr, out.stderr
    assert "Started a local Ray instance" not in out.stderr, out.stderr


def test_rays_own_lines_show_when_asked_for(tmp_path):
    out, written = _probe(tmp_path, OPMATRIX_RAY_VERBOSE="1")
    assert "Started a local Ray instance" in out.stderr and written == []
