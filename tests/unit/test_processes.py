"""opmatrix.incell.processes: the escaped-process sweep acts only in a process that became a child subreaper (the
cell runner's own); a program that runs a cell in-process keeps its own children."""
import subprocess
import sys

from opmatrix.incell import processes


def test_end_escaped_leaves_the_children_of_a_process_that_is_not_a_subreaper_alone():
    child = subprocess.Popen(["sleep", "30"])  # not started through processes.popen
    try:
        assert processes.end_escaped() == []
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


def test_a_subreaper_ends_what_it_did_not_start_and_keeps_what_it_did():
    """In a process of its own: it becomes a subreaper, starts one child through popen() and one whose parent exits
    at once (`sh -c 'setsid sleep 30 &'`: the sleep is reparented to it); only the orphan is ended."""
    code = '''
import subprocess, time
from opmatrix.incell import processes
assert processes.become_subreaper()
kept = processes.popen(["sleep", "30"])
subprocess.run(["sh", "-c", "setsid sleep 31 &"], check=True)
deadline = time.monotonic() + 10
# until the orphan is `sleep 31` itself: before setsid execs, the forked shell has sh's command line
while not any(c.split() == ["sleep", "31"] for _, c in processes._children().values()) \
        and time.monotonic() < deadline:
    time.sleep(0.02)
ended = processes.end_escaped()
print(ended, kept.poll())
assert len(ended) == 1 and ended[0].endswith("sleep 31"), ended
assert kept.poll() is None
kept.kill()
'''
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr + out.stdout
