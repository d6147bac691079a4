"""`opmatrix report RUN`: rebuild a stored run's report from its results.jsonl (opmatrix.report.build.finish, the
same ending as `opmatrix run`), under the run folder's lock."""
from __future__ import annotations

from pathlib import Path

from opmatrix.commands.common import known_runs, reports_argument, subcommand
from opmatrix.core.errors import UsageError


def add_parser(sub) -> None:
    rep = subcommand(sub, "report", "rebuild results.parquet, verdicts.json, report.md and report.html of a run "
                     "from its results.jsonl", "  opmatrix report 20261130-h200-full --open\n  opmatrix report "
                     "path/to/run-folder --strict", handle)
    rep.add_argument("run", help="run id (folder under reports/) or a run folder path")
    reports_argument(rep)
    rep.add_argument("--strict", action="store_true", help="refuse (exit 2) when results.jsonl has lines that are "
                     "not valid rows, instead of reporting from the others and listing them")
    rep.add_argument("--open", action="store_true", help="open report.html in the default web browser")


def handle(args) -> int:
    from rich.console import Console

    from opmatrix.report.build import finish
    from opmatrix.store import REPORT_HTML, RESULTS_JSONL, ResultStore, run_dir

    reports = Path(args.reports)
    folder = run_dir(args.run, reports)
    if not (folder / RESULTS_JSONL).is_file():
        raise UsageError(f"{folder}: no {RESULTS_JSONL} in this folder, so there is nothing to report (a run folder "
                         f"is written by `opmatrix run`); runs under {reports}: {known_runs(reports)}")
    store = ResultStore(folder)
    with store.lock("opmatrix report", "then report it"):  # never from a run still writing it
        finish(store, Console(), strict=args.strict)
    if args.open:
        import webbrowser

        webbrowser.open((folder / REPORT_HTML).resolve().as_uri())
    return 0
