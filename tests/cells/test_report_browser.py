"""The HTML pages as a person sees them: opened in headless Chromium (the system's browser, driven by Selenium
through the system's chromedriver), at 1280 px wide. Asserted: the verdict and coverage tables and the charts
render (non-empty SVG of the expected size), the browser logs no console error, the page makes no request beyond
its own file, a malicious error string shows as text and no script runs. The screenshots are kept as test
artifacts (test-artifacts/, or $OPMATRIX_TEST_ARTIFACTS) to look at.

Chromium comes from the system (Debian's `chromium` and `chromium-driver`, installed by .ci/run). Without them
the test is skipped with the reason, except under CI (CI=true), where it fails: a browser test that silently
skips in CI proves nothing.
"""
import contextlib
import io
import json
import os
import shutil
import struct
from pathlib import Path

import pytest

from opmatrix import cli, paths
from tests.report_pages import EVIL_ERROR, EVIL_FAILED, hostile_run

pytestmark = pytest.mark.usefixtures("html_pages")  # the suite writes no pages elsewhere (tests/conftest.py)

pytestmark = pytest.mark.integration

WIDTH = 1280
CHART_WIDTH = 1152  # charts.WIDTH_IN x DPI: the speed-up and roofline charts fit the 1280 px page unscaled
ARTIFACTS = Path(os.environ.get("OPMATRIX_TEST_ARTIFACTS", paths.ROOT / "test-artifacts"))
STATUS_OK_BACKGROUND = "rgb(217, 242, 221)"  # page.BACKGROUND["green"]


def _missing(what: str):
    message = (f"{what}; install Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver), "
               "or name them with OPMATRIX_CHROMIUM / OPMATRIX_CHROMEDRIVER")
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {message}")
    pytest.skip(message)


def _binaries() -> tuple[str, str]:
    browser = os.environ.get("OPMATRIX_CHROMIUM") or next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    driver = os.environ.get("OPMATRIX_CHROMEDRIVER") or next(
        (p for p in map(shutil.which, ("chromedriver", "chromium.chromedriver")) if p), None)
    if not browser or not driver:
        _missing(f"no {'Chromium' if not browser else 'chromedriver'} on this machine")
    return browser, driver


@pytest.fixture(scope="module")
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _missing("selenium is not installed (pip install -e .[test])")
    binary, driver_path = _binaries()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                f"--window-size={WIDTH},900", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def pages(tmp_path_factory, html_pages):
    """report.html and comparison.html of a real nightly made hostile (tests/report_pages.py), and a trend page of
    the committed history."""
    tmp = tmp_path_factory.mktemp("browser")
    folder = hostile_run(tmp)
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["report", str(folder)]) == 0
        assert cli.main(["history", "kernel=rmsnorm", "device=h200", "--html", str(tmp / "trend.html")]) == 0
    return {"report": folder / "report.html", "comparison": folder / "comparison.html", "trend": tmp / "trend.html"}


def open_page(driver, path: Path) -> dict:
    """Load the page, then what it logged and fetched: {"console": [...], "requests": [urls]}."""
    driver.get_log("browser"), driver.get_log("performance")  # drop what an earlier page left
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": WIDTH, "height": 900,
                                                                  "deviceScaleFactor": 1, "mobile": False})
    driver.get(path.resolve().as_uri())
    requests = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requests.append(message["params"]["request"]["url"])
    return {"console": [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")],
            "requests": requests}


def screenshot(driver, name: str) -> Path:
    """The whole page at 1280 px wide as a PNG under ARTIFACTS; asserts the page itself is no wider."""
    width = driver.execute_script("return document.documentElement.scrollWidth")
    assert width <= WIDTH, f"the page is {width} px wide: unreadable at {WIDTH} px without scrolling sideways"
    height = min(driver.execute_script("return document.documentElement.scrollHeight"), 16000)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": WIDTH, "height": height,
                                                                  "deviceScaleFactor": 1, "mobile": False})
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    assert driver.save_screenshot(str(path))
    png = path.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (WIDTH, height)
    return path


def charts(driver) -> list[dict]:
    return driver.execute_script("""
        return [...document.querySelectorAll('svg[data-chart]')].map(s => {
            const r = s.getBoundingClientRect();
            return {name: s.dataset.chart, width: r.width, height: r.height,
                    marks: s.querySelectorAll('path, use, text').length};
        });""")


def assert_self_contained(page: dict, path: Path) -> None:
    assert page["console"] == [], f"console messages: {page['console']}"
    own = path.resolve().as_uri()
    assert own in page["requests"], "the performance log recorded no load of the page: the check below is blind"
    assert set(page["requests"]) == {own}, f"requests beyond the page's own file: {page['requests']}"


def test_report_page_renders_its_tables_and_charts_and_runs_nothing(browser, pages):
    path = pages["report"]
    page = open_page(browser, path)
    assert_self_contained(page, path)
    assert browser.execute_script("return document.querySelectorAll('#verdicts table tbody tr').length") >= 4
    assert browser.execute_script("return document.querySelectorAll('#coverage table tbody tr').length") >= 6
    colour = browser.execute_script("return getComputedStyle(document.querySelector('#coverage td.st-green'))"
                                    ".backgroundColor")
    assert colour == STATUS_OK_BACKGROUND
    drawn = {c["name"]: c for c in charts(browser)}
    assert {"speedup-gemm_relu", "roofline"} <= set(drawn)
    for chart in drawn.values():
        assert abs(chart["width"] - CHART_WIDTH) < 2 and chart["height"] > 100 and chart["marks"] > 20, chart
    # the malicious error shows as text (the failures table, the coverage hover), and nothing of it ran
    assert EVIL_ERROR in browser.execute_script("return document.body.innerText")
    hover = browser.execute_script("return [...document.querySelectorAll('#coverage td[title]')]"
                                   ".map(td => td.title).join('\\n')")
    assert EVIL_ERROR in hover
    assert browser.execute_script("return document.querySelectorAll('script, img, iframe').length") == 0
    assert browser.execute_script("return window.pwned") is None
    assert browser.title == "opmatrix run nightly-20261130-101538"
    screenshot(browser, "report")


def test_comparison_page_shows_the_break_first_with_its_chart(browser, pages):
    path = pages["comparison"]
    page = open_page(browser, path)
    assert_self_contained(page, path)
    first = browser.execute_script("return document.querySelector('section section table tbody tr').innerText")
    assert first.startswith("breaks") and EVIL_FAILED in first
    drawn = charts(browser)
    assert [c["name"] for c in drawn] == ["compare-0"] and drawn[0]["marks"] > 20 and drawn[0]["height"] > 100
    assert browser.execute_script("return window.pwned") is None
    screenshot(browser, "comparison")


def test_trend_page_renders_a_chart_per_series(browser, pages):
    path = pages["trend"]
    page = open_page(browser, path)
    assert_self_contained(page, path)
    drawn = charts(browser)
    assert len(drawn) >= 4
    for chart in drawn:
        assert chart["width"] > 400 and chart["height"] > 150 and chart["marks"] > 20, chart
    screenshot(browser, "trend")
