"""`opmatrix history [FILTER ...]`: per series, its values over the nights of reports/history, the change points and
what changed in the toolchain that night (Markdown, JSON with --json, or a trend page with --html); `opmatrix
history append RUN ...` adds stored runs to the history (opmatrix.upgrade.history)."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from opmatrix.commands.common import json_argument, reports_argument, subcommand
from opmatrix.core.errors import UsageError
from opmatrix.core.result import split_backend_label
from opmatrix.mdtable import row
from opmatrix.upgrade import history
from opmatrix.upgrade.history import FILTER_KEYS, METRICS, Trend, short_night

APPEND = "append"


def add_parser(sub) -> None:
    h = subcommand(sub, "history", "per series (device, kernel, workload, dtype, backend, variant), its values over "
                   "the nightly runs in reports/history, the change points and what changed in the toolchain that "
                   "night; `history append RUN ...` adds stored runs",
                   "  opmatrix history append 20261130-h200-full nightly-20261201-030000\n"
                   "  opmatrix history kernel=gemm_relu backend=tilelang device=h200\n"
                   "  opmatrix history kernel=rmsnorm --metric speedup --json\n"
                   "  opmatrix history device=h200 --html          # reports/history/trend.html", handle)
    h.add_argument("words", nargs="*", metavar="FILTER", help=f"key=value, keys: {', '.join(FILTER_KEYS)} "
                   "(backend=tilelang[autotuned] also picks the variant); or `append RUN ...`")
    h.add_argument("--metric", default="median_ms", choices=METRICS, help="the value followed (default: median_ms)")
    json_argument(h)
    h.add_argument("--history", default=str(history.HISTORY), help="the history folder (default: reports/history)")
    reports_argument(h, "where `append` finds run ids (default: reports/)")
    h.add_argument("--html", nargs="?", const="", metavar="FILE", help="write the trends as one HTML page with a "
                   "chart per series, change points marked, and print its path (default FILE: trend.html in the "
                   "history folder)")


def handle(args) -> int:
    """`history append RUN ...` appends; anything else shows the trends the filters select."""
    if args.words[:1] == [APPEND]:
        return append(args.words[1:], Path(args.history), Path(args.reports))
    return show(parse_filters(args.words), Path(args.history), args.metric, args.json, args.html)


def append(runs: list[str], history_dir: Path, reports: Path) -> int:
    from opmatrix.store import run_dir

    if not runs:
        raise UsageError("name the runs to append: opmatrix history append RUN ... (run ids under reports/ or run "
                         "folders)")
    for run in runs:
        folder = run_dir(run, reports)
        rows = history.append_run(folder, history_dir)
        print(f"{folder.name}: {rows} rows -> {history.run_file(folder, history_dir)}")
    return 0


def show(filters: dict[str, str], history_dir: Path, metric: str, as_json: bool, html: str | None = None) -> int:
    """The trends the filters select, as Markdown or JSON on stdout, or (html not None) as a page whose path is
    printed: html names the file, "" means trend.html in the history folder."""
    if not history_dir.is_dir():
        raise UsageError(f"no history folder {history_dir}: create it with `opmatrix history append RUN` (a run id "
                         "under reports/ or a run folder), once per stored run")
    df = history.read_history(history_dir)
    found = history.trends(df, metric, filters)
    if not found:
        raise UsageError(_nothing_matches(df, filters, metric, history_dir))
    if html is not None:
        print(_write_page(found, metric, filters, history_dir, html))
        return 0
    print(json.dumps([asdict(t) for t in found], indent=1) if as_json else markdown(found, metric))
    return 0


def _write_page(found: list[Trend], metric: str, filters: dict[str, str], history_dir: Path, html: str) -> Path:
    from opmatrix.report.html.trend_page import TREND_HTML, write_trend_page

    path = Path(html) if html else history_dir / TREND_HTML
    wanted = " ".join(f"{k}={v}" for k, v in filters.items()) or "every series"
    try:
        return write_trend_page(found, metric, path, f"{history_dir}, {wanted}")
    except OSError as exc:
        raise UsageError(f"--html {path}: cannot write it ({exc.strerror or exc}); name a writable file") from None


def parse_filters(words: list[str]) -> dict[str, str]:
    """key=value words as a dict; UsageError naming the valid keys for an unknown one."""

    filters = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key or not value:
            raise UsageError(f"filter {word!r} is not key=value (e.g. kernel=gemm_relu); to add runs: "
                             "opmatrix history append RUN ...")
        if key not in FILTER_KEYS:
            raise UsageError(f"unknown filter key {key!r}: use one of {', '.join(FILTER_KEYS)}")
        filters[key] = value
    return filters


def markdown(trends: list[Trend], metric: str) -> str:
    shifts = sum(len(t.shifts) for t in trends)
    lines = [f"# History of {metric}: {len(trends)} series, {shifts} change point(s)", ""]
    for t in trends:
        lines += _trend_section(t)
    return "\n".join(lines)


def _trend_section(t: Trend) -> list[str]:
    at = {s.index: s for s in t.shifts}
    lines = [f"## {t.label()}", "",
             f"{len(t.values)} night(s), {short_night(t.nights[0])} → {short_night(t.nights[-1])}; "
             f"{len(t.shifts)} change point(s)", "",
             f"| night | run | toolchain | fingerprint | {t.metric} | change point |", "|---|---|---|---|---|---|"]
    for i, value in enumerate(t.values):
        shift = at.get(i)
        note = f"×{shift.ratio:.3f} from here: {shift.changed}" if shift else ""
        lines.append(row((short_night(t.nights[i]), t.run_ids[i], t.toolchains[i], t.fingerprints[i],
                          f"{value:.4g}", note)))
    lines += [""] + [f"- `{fp}`: {text or 'versions not recorded'}" for fp, text in t.versions.items()] + [""]
    return lines


def _nothing_matches(df, filters: dict[str, str], metric: str, history_dir: Path) -> str:
    """Why no series was found: a filter value the history does not hold (its values named), or no `ok` values."""
    if not len(df):
        return f"the history {history_dir} holds no rows yet: add runs with `opmatrix history append RUN`"
    for key, value in filters.items():
        known = sorted(set(df[key].astype(str))) if len(df) else []
        split = split_backend_label(value) if key == "backend" else None
        if (split[0] if split else value) not in known:
            return f"no {key} {value!r} in {history_dir}; {key}s there: {', '.join(known) or 'none'}"
    wanted = " ".join(f"{k}={v}" for k, v in filters.items()) or "any series"
    return f"no `ok` row with a {metric} in {history_dir} for {wanted}"
