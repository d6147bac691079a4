"""What committed runs (reports/) show, read without rebuilding them all: the full H200 run's report.md has every
section a reader needs (CUDA-graph replays, the CUPTI cross-check, each cell's ceilings, clock drops), and a stored
run weighs effort by the lines of code recorded when it ran, not by today's sources. Every committed report rebuilt
from its rows: tests/golden/test_reports.py."""
import shutil

from opmatrix import paths
from opmatrix.decide import verdicts as verdict_rules
from opmatrix.report.build import decided
from opmatrix.store import MANIFEST, RESULTS_JSONL, ResultStore


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
