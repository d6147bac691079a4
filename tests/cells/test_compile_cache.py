"""Build outcomes and build caches kept between real runs (opmatrix.incell.compile_cache), end to end through
opmatrix.run and a cell: a device no host has gets its `compiles` / `lowers` / `unsupported` rows built once and
served to the next run, which says "cached from RUN"; a timed job compiles warm from the caches its first run kept,
and its row says "kept from RUN", as do the host's ceilings, measured once and served to the later runs. The same
rules without a run: tests/unit/test_compile_cache.py (tests/compile_cache_projects.py: the projects)."""
import pytest

from tests.compile_cache_projects import lowering_project, warm_project


@pytest.fixture
def project(tmp_path):
    return lowering_project(tmp_path)


@pytest.fixture
def kept_project(tmp_path):
    return warm_project(tmp_path)


@pytest.mark.integration
def test_a_real_run_twice_builds_once(project):
    import pandas as pd

    from opmatrix.run import run
    from opmatrix.scheduling.local import LocalScheduler

    def rows(run_id, **kw):
        folder = run(project / "m.toml", reports_dir=project / "reports", run_id=run_id,
                     scratch_root=project / "scratch", scheduler=LocalScheduler(), **kw)
        return {r.backend: r for r in pd.read_parquet(folder / "results.parquet").itertuples()}
    first = rows("r1")
    assert first["src"].status == "lowers" and "sm_90 source" in first["src"].error, first["src"].error
    assert first["no"].status == "unsupported" and first["src"].compile_cache != "cached from r1"
    second = rows("r2")
    assert second["src"].compile_cache == "cached from r1" and second["no"].compile_cache == "cached from r1"
    assert second["src"].error == f"{first['src'].error}; cached from r1"


@pytest.mark.integration
def test_a_timed_job_compiles_warm_from_its_kept_caches_and_its_row_says_so(kept_project, monkeypatch):
    """Also the host's ceilings ([run] ceilings_kept_h, default 24 h): measured in the first run's cell (its own
    folder of kept ceilings starts empty), then served to the later runs, whose rows and report say when."""
    import json

    import pandas as pd

    from opmatrix.incell import host_cache
    from opmatrix.run import run
    from opmatrix.scheduling.local import LocalScheduler

    monkeypatch.setenv(host_cache.ROOT_ENV, str(kept_project / "kept-host"))
    ceilings = {}

    def row(run_id, **kw):
        folder = run(kept_project / "m.toml", reports_dir=kept_project / "reports", run_id=run_id,
                     scratch_root=kept_project / "scratch", scheduler=LocalScheduler(), **kw)
        rows = pd.read_parquet(folder / "results.parquet")
        warm = rows[rows.backend == "warm"].iloc[0]
        assert warm.status == "ok", warm.error
        assert rows.ceiling_tflops.notna().all() and rows.ceilings_kept.nunique() == 1
        ceilings[run_id] = (warm.ceiling_tflops, warm.ceiling_gbps, warm.ceilings_kept,
                            (folder / "report.md").read_text())
        return warm.compile_cache, json.loads(warm.config)["found"]
    assert row("r1") == ("cold", False)
    assert row("r2") == ("kept from r1", True)  # the worker found the first run's build output
    assert row("r3", rebuild=True) == ("cold", False)
    assert row("r4") == ("kept from r3", True)
    first_tflops, first_gbps, measured_in_r1, report = ceilings["r1"]
    assert measured_in_r1 == "" and "ceilings kept" not in report
    for later in ("r2", "r3", "r4"):
        tflops, gbps, kept_from, report = ceilings[later]
        assert (tflops, gbps) == (first_tflops, first_gbps) and kept_from
        assert f"cpu: ceilings kept from an earlier cell on the same host, measured at {kept_from}" in report
