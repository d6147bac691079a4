"""Every committed run folder rebuilds from its own results.jsonl into exactly the report.md (and verdicts.json)
that is committed:
reports are a function of the store only, and the renderer is exercised on real GPU results (CUDA-graph columns,
the CUPTI cross-check, autotuning records, compile-only rows). What single committed reports show, without the
rebuild: tests/unit/test_reports.py."""
import shutil

import pytest

from opmatrix import paths, report
from opmatrix.decide import verdicts as verdict_rules
from opmatrix.report.build import decided
from opmatrix.store import MANIFEST, RESULTS_JSONL, ResultStore

RUNS = sorted(p for p in paths.REPORTS.iterdir() if (p / RESULTS_JSONL).is_file())


@pytest.mark.golden
@pytest.mark.parametrize("run", RUNS, ids=[p.name for p in RUNS])
def test_committed_report_rebuilds_unchanged(run, tmp_path):
    copy = tmp_path / run.name
    copy.mkdir()
    for name in (RESULTS_JSONL, MANIFEST):
        shutil.copy(run / name, copy / name)
    store = ResultStore(copy)
    df, verdicts = decided(store.consolidate(), store.manifest())
    assert report.markdown(df, store.manifest(), verdicts) == (run / "report.md").read_text(encoding="utf-8")
    if verdicts is not None:  # verdicts.json is rebuilt from the same rows too
        assert verdict_rules.to_json(verdicts) == (run / "verdicts.json").read_text(encoding="utf-8")
