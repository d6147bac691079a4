"""`opmatrix deployments [RUN ...]`: the supported-deployments table per kernel, from the verdicts of stored runs
(opmatrix.upgrade.deployments): which backend to ship on each device and toolchain, the latest run winning."""
from __future__ import annotations

from pathlib import Path

from opmatrix.commands.common import json_argument, project_plugins, reports_argument, subcommand
from opmatrix.core.errors import UsageError


def add_parser(sub) -> None:
    d = subcommand(sub, "deployments", "the supported-deployments table per kernel: for each device and "
                   "toolchain (the versions its cells imported), which backend to ship, from the verdicts of stored "
                   "runs (latest run wins; kernels only tests use are left out)",
                   "  opmatrix deployments\n  opmatrix deployments --since 2026-12-01\n"
                   "  opmatrix deployments 20261201-h200-paired --json", handle)
    d.add_argument("runs", nargs="*", help="run ids or folders (default: every run under reports/)")
    reports_argument(d)
    d.add_argument("--since", help="only runs started at or after this ISO date or time (UTC), e.g. 2026-11-30")
    d.add_argument("--runs", dest="last", type=int, metavar="N", help="only the latest N runs (after --since)")
    json_argument(d)


def handle(args) -> int:
    from opmatrix.store import known_runs, run_dir
    from opmatrix.upgrade import deployments as deploy

    reports = Path(args.reports)
    folders = [run_dir(r, reports) for r in args.runs] or [reports / r for r in known_runs(reports)]
    try:
        since = deploy.since_time(args.since) if args.since else None
    except ValueError:
        raise UsageError(f"--since {args.since!r}: not a date; give an ISO date or date and time, e.g. 2026-11-30 "
                         "or 2026-11-30T12:00 (UTC)") from None
    if args.last is not None and args.last < 1:
        raise UsageError(f"--runs {args.last}: give how many of the latest runs to read, 1 or more")
    # every run of the reports folder: only the project's kernels (a kernel that exists only for a test is left
    # out); runs named on the command line: whatever they decided, as asked
    kernels = None if args.runs else set(project_plugins().kernels())
    rows = deploy.deployments(folders, kernels=kernels, since=since, last=args.last)
    if not rows:
        raise UsageError(f"no verdicts in {', '.join(str(f) for f in folders) or reports}: verdicts come from runs "
                         "timed in rounds (opmatrix run writes verdicts.json)")
    print(deploy.to_json(rows) if args.json else deploy.markdown(rows))
    return 0
