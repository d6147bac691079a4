"""Every committed run folder rebuilds from its own results.jsonl into exactly the report.md (and verdicts.json)
that is committed:
reports are a function of the store only, and the renderer is exercised on real GPU results (CUDA-graph columns,
the CUPTI cross-check, autotuning records, compile-only rows)."""
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


def test_full_h200_run_has_every_section_a_reader_needs():
    text = (paths.REPORTS / "20261130-h200-full" / "report.md").read_text(encoding="utf-8")
    for title in ("## Coverage", "## Correctness", "## Performance: gemm_relu", "## Performance: rmsnorm",
                  "## Performance: flash_attention", "## Measurement quality", "## Cross-check against CUPTI",
                  "## Autotuning", "## Compile time"):
        assert title in text
    assert "; graph " in text  # launch-bound rmsnorm rows carry a CUDA-graph replay time
    assert "tilelang: launch-bound" in text  # decode rmsnorm, not "25 GB/s, 1% of roofline"
    assert "| h200     | gpu-a       | bfloat16 702.2, float16 659.3 |" in text  # each cell's own ceilings
    assert "- h200: clock dropped in 87/142 timed rows (SwPowerCap), SM 1395–1980 MHz" in text
    assert "outside:" not in text and "(separate loop)" not in text  # the old CUPTI method is left out


def test_a_stored_run_weighs_effort_by_the_lines_recorded_when_it_ran(tmp_path):
    run = paths.REPORTS / "20261130-h200-decide-a"
    copy = tmp_path / run.name
    copy.mkdir()
    shutil.copy(run / RESULTS_JSONL, copy / RESULTS_JSONL)
    manifest = ResultStore(run).manifest()
    assert manifest.lines_of_code["rmsnorm/triton"] > 0
    manifest.kernels_dir = str(tmp_path / "no-such-checkout")  # today's sources play no part
    manifest.lines_of_code["rmsnorm/triton"] = 999
    (copy / MANIFEST).write_text(manifest.to_json(), encoding="utf-8")
    store = ResultStore(copy)
    _, verdicts = decided(store.consolidate(), store.manifest())
    assert "\"lines_of_code\": 999" in verdict_rules.to_json(verdicts)
