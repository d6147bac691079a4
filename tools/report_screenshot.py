"""Screenshots of a run's report.html as a reader sees it at 1280 px, for the README (docs/report-h200*.png).

    python tools/report_screenshot.py reports/20261130-h200-decide-a docs/report-h200

renders the run's page from its stored rows (as `opmatrix report` does, without rewriting the run folder), opens
it in the system's headless Chromium through chromedriver (Selenium), and writes two PNGs: PREFIX.png (header,
verdicts, coverage) and PREFIX-charts.png (one kernel's speed-up chart, --kernel, and the roofline).
"""
from __future__ import annotations

import argparse
import io
import shutil
import sys
import tempfile
from pathlib import Path

WIDTH = 1280


def render(run: Path, out: Path) -> Path:
    from opmatrix.report.build import decided
    from opmatrix.report.html.run_page import write_run_page
    from opmatrix.store import ResultStore, load_run

    store = ResultStore(run, create=False)
    df, verdicts = decided(load_run(run), store.manifest())
    return write_run_page(df, store.manifest(), out, verdicts)


def driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or "chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"):
        options.add_argument(arg)
    return webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver") or "chromedriver"))


def shoot(page: Path, prefix: Path, kernel: str) -> list[Path]:
    from PIL import Image

    browser = driver()
    try:
        browser.get(page.resolve().as_uri())
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": WIDTH, "height": height,
                                                                       "deviceScaleFactor": 1, "mobile": False})
        full = Image.open(io.BytesIO(browser.get_screenshot_as_png())).convert("RGB")

        def box(selector: str) -> tuple[int, int]:
            rect = browser.execute_script(f"const r = document.querySelector('{selector}').getBoundingClientRect();"
                                          "return [r.top + window.scrollY, r.bottom + window.scrollY];")
            return int(rect[0]), int(rect[1])

        top = prefix.with_suffix(".png")
        charts = prefix.with_name(prefix.name + "-charts.png")
        crops = {top: [(0, box("#coverage")[1] + 16)],
                 charts: [(box(f"#{kernel}")[0] - 10, box(f"#{kernel} figure")[1] + 10), (box("#roofline")[0] - 10,
                                                                                             box("#roofline")[1] + 16)]}
    finally:
        browser.quit()
    for path, pieces in crops.items():
        parts = [full.crop((0, max(a, 0), WIDTH, min(b, full.height))) for a, b in pieces]
        shot = Image.new("RGB", (WIDTH, sum(p.height for p in parts)), "white")
        for i, part in enumerate(parts):
            shot.paste(part, (0, sum(p.height for p in parts[:i])))
        shot.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    return list(crops)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, help="a run folder")
    p.add_argument("prefix", type=Path, help="the PNGs' path without .png")
    p.add_argument("--kernel", default="gemm_relu", help="the kernel whose speed-up chart is shown")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        page = render(args.run, Path(tmp) / "report.html")
        print(f"report.html: {page.stat().st_size / 1024:.0f} KiB")
        for path in shoot(page, args.prefix, "performance--" + args.kernel.replace("_", "-")):
            print(f"{path}: {path.stat().st_size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
