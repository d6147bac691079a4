"""Two runs that need the same cell environment: they take turns while it is built, then share it (one run per
GPU of a host); the lock is held until the cell runner reports that it started in the finished environment."""
import fcntl

import pytest

from opmatrix import paths
from opmatrix.cellenv.launch import environment_lock


def other_run_can_take(session: str) -> bool:
    with open(paths.ROOT / ".nox" / f"{session}.lock", "a+") as fh:  # another open file: flock sees another owner
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(fh, fcntl.LOCK_UN)
        return True


@pytest.mark.parametrize("release_early", [True, False])
def test_the_environment_is_locked_while_built_and_shared_once_the_runner_started(release_early):
    session = "cell-lock-test-0000000000"
    with environment_lock(session) as release:
        assert not other_run_can_take(session)
        if release_early:
            release()  # the runner printed its ready line
        assert other_run_can_take(session) == release_early
    assert other_run_can_take(session)
    (paths.ROOT / ".nox" / f"{session}.lock").unlink()
