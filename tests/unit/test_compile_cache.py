"""Build outcomes kept between runs (opmatrix.incell.compile_cache), without a run: a device no host has gets its
`compiles` / `lowers` / `unsupported` rows, and a device a host has its `unsupported` ones, from the run that made
them while the implementation's sources, the engine, the cell environment, the host and the target are unchanged;
the row says "cached from RUN"; an edit, a failure or --rebuild builds again, and a timed row is timed every run;
kept build caches are settled by the job's row. The cell runner's part is a stand-in here; through real runs:
tests/cells/test_compile_cache.py (tests/compile_cache_projects.py: the projects)."""
import dataclasses

import pytest

from opmatrix import plan
from opmatrix.core import status
from opmatrix.core.jobs import Mode
from opmatrix.core.result import Result
from opmatrix.incell import compile_cache
from opmatrix.matrix import load_matrix
from opmatrix.scheduling.dispatch import compile_plan
from tests.compile_cache_projects import LOWERS, lowering_project, warm_project


@pytest.fixture
def project(tmp_path):
    return lowering_project(tmp_path)


def compile_plans(root, run_id):
    planned = plan.cell_plans(load_matrix(root / "m.toml"), run_id, root / "scratch")
    return [compile_plan(p) for p in planned]


def timed_plan(root, run_id, **settings):
    """The plan of root/m.toml's one cell, `settings` replaced."""
    p, = plan.cell_plans(load_matrix(root / "m.toml"), run_id, root / "scratch")
    return p.replace(settings=dataclasses.replace(p.settings, **settings))


def built(p):
    """What a cell runner hands back for these jobs: one row each, as the worker words it."""
    def run(rest):
        for job in rest.jobs:
            outcome = (status.LOWERS, "sm_90 source") if job.backend == "src" else (status.UNSUPPORTED, "not for it")
            yield Result(**rest.identity(job), status=outcome[0], error=outcome[1], compile_cache="cold",
                         duration_s=1.5)
    return run


def test_a_second_run_reuses_the_rows_and_says_from_which_run(project):
    first, = compile_plans(project, "r1")
    rows = list(compile_cache.through(first, built(first)))
    assert {r.compile_cache for r in rows} == {"cold"} and len(rows) == 2
    again, = compile_plans(project, "r2")
    rows = {r.backend: r for r in compile_cache.through(again, lambda rest: pytest.fail(f"built {rest.jobs}"))}
    assert rows["src"].status == status.LOWERS and rows["no"].status == status.UNSUPPORTED
    assert rows["src"].run_id == "r2" and rows["src"].compile_cache == "cached from r1"
    assert rows["src"].error == "sm_90 source; cached from r1" and rows["src"].duration_s == 0.0


def test_an_edited_implementation_is_built_again_and_the_others_are_not(project):
    first, = compile_plans(project, "r1")
    list(compile_cache.through(first, built(first)))
    (project / "kernels" / "probe" / "src.py").write_text(LOWERS + "# edited\n")
    again, = compile_plans(project, "r2")
    asked = []
    rows = list(compile_cache.through(again, lambda rest: asked.extend(rest.jobs) or built(rest)(rest)))
    assert [j.backend for j in asked] == ["src"]
    assert {r.backend: r.compile_cache for r in rows} == {"no": "cached from r1", "src": "cold"}


def test_rebuild_builds_everything_again_and_keeps_the_new_rows(project):
    first, = compile_plans(project, "r1")
    list(compile_cache.through(first, built(first)))
    forced = compile_plans(project, "r2")[0].replace(rebuild=True)
    assert {r.compile_cache for r in compile_cache.through(forced, built(forced))} == {"cold"}
    third, = compile_plans(project, "r3")
    assert {r.compile_cache for r in compile_cache.through(third, built(third))} == {"cached from r2"}


def test_failed_builds_are_never_cached(project):
    first, = compile_plans(project, "r1")

    def failing(rest):
        for job in rest.jobs:
            yield Result(**rest.identity(job), status=status.COMPILE_ERROR, error="nvcc crashed")
    list(compile_cache.through(first, failing))
    again, = compile_plans(project, "r2")
    assert {r.compile_cache for r in compile_cache.through(again, built(again))} == {"cold"}


def test_another_target_or_environment_is_another_key(project):
    p, = compile_plans(project, "r1")
    job = p.jobs[0]
    other_arch = p.replace(cell=dataclasses.replace(p.cell, device=dataclasses.replace(p.cell.device, arch="sm_100")))
    other_env = p.replace(cell=dataclasses.replace(p.cell, env_hash="another"))
    keys = {compile_cache.key(x, job) for x in (p, other_arch, other_env)}
    assert len(keys) == 3


def test_a_timed_cell_reuses_only_its_unsupported_rows(project):
    def run(rest):
        for job in rest.jobs:
            outcome = status.OK if job.backend == "src" else status.UNSUPPORTED
            yield Result(**rest.identity(job), status=outcome, error="" if outcome == status.OK else "not here")
    first = timed_plan(project, "r1")  # a device this host has: built and timed
    assert compile_cache.applies(first)
    list(compile_cache.through(first, run))
    again = timed_plan(project, "r2")
    asked = []
    rows = {r.backend: r for r in compile_cache.through(again, lambda rest: asked.extend(rest.jobs) or run(rest))}
    assert [j.backend for j in asked] == ["src"]  # an ok row is timed again every run
    assert rows["no"].compile_cache == "cached from r1" and rows["src"].compile_cache == ""
    partner = dataclasses.replace(again.jobs[0], variant="partner")
    kept = []
    list(compile_cache.through(again.replace(partners=(partner,)), lambda rest: kept.append(rest.partners) or ()))
    assert kept == [(partner,)]  # a resumed job's timing partners stay with it


@pytest.fixture
def kept_project(tmp_path):
    return warm_project(tmp_path)


def test_kept_build_caches_are_settled_by_the_jobs_row(kept_project):
    first = timed_plan(kept_project, "r1")
    job = next(j for j in first.jobs if j.backend == "warm")
    kept = compile_cache.kept_build(first, job)
    assert kept.built_by == "" and kept.folder.is_dir() and kept.folder.name == compile_cache.key(first, job)
    (kept.folder / "object").write_text("code")
    row = Result(**first.identity(job), status=status.OK, compile_cache="cold")
    assert kept.settle(row, "r1").compile_cache == "cold"  # filled by this run: a first build's compile time
    again = compile_cache.kept_build(timed_plan(kept_project, "r2"), job)
    assert again.built_by == "r1" and (again.folder / "object").is_file()
    assert again.settle(row, "r2").compile_cache == "kept from r1"
    failed = dataclasses.replace(row, status=status.MISMATCH)
    assert compile_cache.kept_build(timed_plan(kept_project, "r3"), job).settle(failed, "r3") is failed
    assert not again.folder.exists()  # a job that failed leaves no caches behind
    fourth = compile_cache.kept_build(timed_plan(kept_project, "r4"), job)
    assert fourth.built_by == "" and list(fourth.folder.iterdir()) == []


def test_rebuild_empties_kept_caches_and_cold_or_compile_only_plans_keep_none(kept_project):
    first = timed_plan(kept_project, "r1")
    job = next(j for j in first.jobs if j.backend == "warm")
    kept = compile_cache.kept_build(first, job)
    kept.settle(Result(**first.identity(job), status=status.OK), "r1")
    assert compile_cache.kept_build(timed_plan(kept_project, "r1b"), job).built_by == ""  # it cached nothing
    (kept.folder / "object").write_text("code")
    kept.settle(Result(**first.identity(job), status=status.OK), "r1")
    forced = compile_cache.kept_build(timed_plan(kept_project, "r2").replace(rebuild=True), job)
    assert forced.built_by == "" and list(forced.folder.iterdir()) == []
    assert compile_cache.kept_build(timed_plan(kept_project, "r3", build_cache="cold"), job) is None
    assert compile_cache.kept_build(timed_plan(kept_project, "r4").replace(mode=Mode.COMPILE), job) is None
