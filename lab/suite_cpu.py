"""Where the test suite's CPU goes, per test and per file: the suite is CPU-bound on a 2-core machine and wall
times move with the host's load, so its cost is read in CPU seconds (this process's and its waited-for children's,
getrusage), which a busy neighbour moves far less.

    PYTHONPATH=lab SUITE_CPU_OUT=/tmp/suite-cpu.jsonl python -m pytest -p suite_cpu -n 3 --dist loadfile
    python lab/suite_cpu.py /tmp/suite-cpu.jsonl [--top 30]

As a pytest plugin (-p suite_cpu) it appends one JSON line per test (setup, call and teardown together, so a
module-scoped run is charged to the first test that asks for it) to $SUITE_CPU_OUT. Run as a script, it sums the
lines per file, costliest first. Processes that are never waited for by the test (Ray's daemons) are not counted.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import sys
import time

OUT_ENV = "SUITE_CPU_OUT"


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


try:  # a plugin where pytest is importable; the summary runs without it
    import pytest
except ImportError:
    pytest = None

if pytest is not None:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        started, (own, children) = time.perf_counter(), _cpu()
        yield
        own_after, children_after = _cpu()
        line = {"test": item.nodeid, "wall_s": time.perf_counter() - started, "own_cpu_s": own_after - own,
                "children_cpu_s": children_after - children, "worker": os.environ.get("PYTEST_XDIST_WORKER", "")}
        with open(os.environ.get(OUT_ENV, "suite-cpu.jsonl"), "a") as out:
            out.write(json.dumps(line) + "\n")


def by_file(lines: list[dict]) -> list[tuple[str, int, float, float]]:
    """(file, tests, wall s, CPU s) per test file, most CPU first."""
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for line in lines:
        entry = files[line["test"].split("::")[0]]
        entry[0] += 1
        entry[1] += line["wall_s"]
        entry[2] += line["own_cpu_s"] + line["children_cpu_s"]
    return sorted(((name, int(n), wall, cpu) for name, (n, wall, cpu) in files.items()), key=lambda f: -f[3])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lines", help="the JSON lines the plugin wrote")
    parser.add_argument("--top", type=int, default=30, help="files to list (default 30)")
    args = parser.parse_args(argv)
    with open(args.lines) as f:
        lines = [json.loads(text) for text in f if text.strip()]
    files = by_file(lines)
    total = sum(f[3] for f in files)
    print(f"{len(lines)} tests in {len(files)} files: {total:.0f} s of CPU")
    for name, n, wall, cpu in files[:args.top]:
        print(f"{cpu:7.1f} s CPU {100 * cpu / total if total else 0:5.1f} %  {wall:7.1f} s wall  {n:4d} tests  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
