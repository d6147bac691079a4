"""report.html and the trend page rebuilt from committed rows (golden: they read reports/): the same rows render the
same page, and the pages of a real 79-row H200 run and of the committed history stay small. The pages' markup,
escaping and sections on a hostile copy of a real nightly: tests/unit/test_report_html.py."""
import pytest

from opmatrix import cli, paths
from opmatrix.report.build import decided
from opmatrix.report.html.run_page import run_page
from opmatrix.store import ResultStore, load_run
from tests.report_pages import MB, RUN

pytestmark = pytest.mark.usefixtures("html_pages")  # the suite writes no pages elsewhere (tests/conftest.py)


@pytest.mark.golden
def test_the_same_rows_render_the_same_page():
    store = ResultStore(paths.REPORTS / RUN, create=False)
    df, verdicts = decided(load_run(paths.REPORTS / RUN), store.manifest())
    assert run_page(df, store.manifest(), verdicts) == run_page(df, store.manifest(), verdicts)


@pytest.mark.golden
def test_page_weight_of_the_real_h200_report_and_the_history():
    store = ResultStore(paths.REPORTS / "20261130-h200-decide-a", create=False)
    df, verdicts = decided(load_run(store.run_dir), store.manifest())
    page = run_page(df, store.manifest(), verdicts)
    assert len(page.encode()) < 1 * MB, f"report.html of a 79-row H200 run weighs {len(page.encode()) / MB:.2f} MB"
    assert page.count("<svg") == 4  # three kernels' speed-ups and the roofline


@pytest.mark.golden
def test_the_trend_page_of_the_committed_history_stays_small(tmp_path):
    out = tmp_path / "trend.html"
    assert cli.main(["history", "--html", str(out)]) == 0
    assert len(out.read_bytes()) < 2 * MB
