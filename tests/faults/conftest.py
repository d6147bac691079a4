"""The fault-injection suite: misbehaving kernels, backends, environments and runs inside normal matrices.

Every test records what it injected and what it observed (`observe`); the terminal summary tabulates those
records, so the numbers it prints are measured, never written down in advance. Every test here is marked
`integration` (a fast unit lane deselects them with `-m "not integration"`).
"""
from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from opmatrix import paths
from tests.faults.harness import EARLY, unique_run_id

HERE = Path(__file__).resolve().parent


@dataclass
class Observation:
    fault: str
    expected: str  # "status/phase" (or an outcome such as "exit 130")
    observed: str
    lost: int = 0  # rows that existed before the fault and are missing after it
    left_behind: int = 0  # processes of the run still alive after it ended

    @property
    def correct(self) -> bool:
        return self.observed == self.expected


PROPERTY = "fault-observation"


@pytest.fixture
def observe(request):
    """observe(fault, expected, observed, lost=0, left_behind=0): record before asserting, so a failing test is
    in the summary too. The record travels with the test's report, so the summary sees it under pytest-xdist."""
    def record(fault: str, expected: str, observed: str, lost: int = 0, left_behind: int = 0) -> Observation:
        obs = Observation(fault, expected, observed, lost, left_behind)
        request.node.user_properties.append((PROPERTY, asdict(obs)))
        return obs

    return record


def observations(tr) -> list[Observation]:
    """Every record of this session, from the test reports (each test's call phase), in report order."""
    found = []
    for kind in ("passed", "failed", "error", "skipped"):
        for report in tr.stats.get(kind, []):
            if getattr(report, "when", None) != "call":
                continue
            found += [Observation(**value) for name, value in getattr(report, "user_properties", ())
                      if name == PROPERTY]
    return found


def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)
    # A module with a long run starts it in the background when collection is over (start_early); its tests go
    # last, so the other modules' tests run meanwhile. Only the order changes: alone, such a module just waits.
    # Under pytest-xdist nothing starts early (pytest_collection_finish), and the order is tests/conftest.py's.
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: hasattr(item.module, "start_early"))


def pytest_collection_finish(session):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # under pytest-xdist every worker collects every module: such a run starts when its module runs
    for module in {item.module for item in session.items if hasattr(item.module, "start_early")}:
        EARLY[module.__name__] = module.start_early()


def pytest_sessionfinish(session, exitstatus):
    for started in EARLY.values():
        started.stop()


# Faults covered by tests elsewhere in the suite: shown in the summary with their outcome when they ran too.
ELSEWHERE = {"tests/cells/test_ray_cluster.py::test_lost_node_is_retried_on_another_node_with_the_device":
             "Ray node lost mid-cell, another node has the device",
             "tests/cells/test_ray_cluster.py::test_lost_node_without_a_replacement_is_lost_and_keeps_what_arrived":
             "Ray node lost mid-cell, no other node"}


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    tr = terminalreporter
    observed = observations(tr)
    if not observed:
        return
    tr.section("fault injection")
    width = max(len(o.fault) for o in observed)
    tr.write_line(f"{'fault':<{width}}  {'expected':<28} {'observed':<28} ok  lost  left")
    for o in observed:
        tr.write_line(f"{o.fault:<{width}}  {o.expected:<28} {o.observed:<28} "
                      f"{'yes' if o.correct else 'NO ':<3} {o.lost:>4}  {o.left_behind:>4}")
    correct = sum(o.correct for o in observed)
    lost = sum(o.lost for o in observed)
    left = sum(o.left_behind for o in observed)
    tr.write_line(f"faults injected: {len(observed)}   classified correctly: {correct}   "
                  f"results lost: {lost} (must be 0)   processes left behind: {left} (must be 0)")
    outcomes = {r.nodeid: r.outcome for kind in ("passed", "failed", "skipped")
                for r in tr.stats.get(kind, []) if getattr(r, "when", "call") == "call"}
    for nodeid, what in ELSEWHERE.items():
        tr.write_line(f"{what}: {outcomes.get(nodeid, 'not run in this session')} ({nodeid})")


@pytest.fixture
def run_id(request):
    """A run id of this test alone; its scratch folder (under the checkout's .opmatrix/) is removed afterwards."""
    rid = unique_run_id(request.node.name.split("[")[0].removeprefix("test_")[:24])
    yield rid
    shutil.rmtree(paths.SCRATCH / rid, ignore_errors=True)
