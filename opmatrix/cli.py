"""The `opmatrix` command: run a matrix, rebuild a report, show the plan or this host's devices."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from opmatrix import paths
from opmatrix.core import status
from opmatrix.core.errors import RunExists, UsageError


def _known_runs(reports: Path) -> str:
    """The run folders under `reports` (those holding results or a manifest), for an error message."""
    from opmatrix.store import MANIFEST, RESULTS_JSONL

    if not reports.is_dir():
        return "none (no such folder)"
    runs = sorted(p.name for p in reports.iterdir() if (p / RESULTS_JSONL).is_file() or (p / MANIFEST).is_file())
    return ", ".join(runs) or "none"


def _redo(args) -> frozenset[str]:
    """--redo is only meaningful with --resume (it picks which stored rows run again); its default there: lost."""
    if args.redo is None:
        return frozenset({status.LOST})
    if not args.resume:
        raise UsageError(f"--redo {args.redo}: --redo only applies to a resumed run; add --resume --run-id RUN, or "
                         "drop --redo")
    return _statuses("--redo", args.redo)


def _check_resume(args) -> None:
    """--resume continues a run folder that exists; a typo in --run-id must not start a fresh full run."""
    from opmatrix.store import MANIFEST, RESULTS_JSONL

    if not args.resume:
        return
    if not args.run_id:
        raise UsageError("--resume continues a run folder: name it with --run-id")
    reports = Path(args.reports)
    folder = reports / args.run_id
    if not ((folder / RESULTS_JSONL).is_file() or (folder / MANIFEST).is_file()):
        raise UsageError(f"--resume --run-id {args.run_id}: no run {args.run_id!r} under {reports} to continue "
                         f"(runs there: {_known_runs(reports)}); drop --resume to start it as a new run")


def _cmd_run(args) -> int:
    from opmatrix.run import run

    if args.run_id is not None:
        paths.check_run_id(args.run_id)
    _check_resume(args)
    redo = _redo(args)
    if args.no_ray:
        from opmatrix.scheduling.local import LocalScheduler

        scheduler = LocalScheduler()
    else:
        from opmatrix.scheduling.ray_cluster import RayScheduler

        scheduler = RayScheduler(args.address, args.num_gpus, verbose=args.verbose)
    fail_on = _statuses("--fail-on", args.fail_on)
    matrix = paths.matrix_file(args.matrix)
    folder = run(matrix, Path(args.reports), args.run_id, scheduler=scheduler, resume=args.resume, redo=redo,
                 deadline_s=args.deadline_s, keep_scratch=args.keep_scratch, rebuild=args.rebuild)
    failed = _failed_exit(folder, fail_on)
    unjudged = _unjudged_exit(folder, matrix, said=not failed)
    return failed or unjudged  # a failed row's 1 first: CI gates on it


NOTHING_JUDGED = 5  # no row failed, yet the run judged nothing it ran (a baseline not installed, no verdict)


def _unjudged_exit(folder: Path, matrix_path: Path, said: bool = True) -> int:
    """NOTHING_JUDGED, each reason on stderr, when a cell's framework baseline is not installed or the run reached
    no verdict (opmatrix.run.unjudged); else 0. The reasons are said even where a failed row's exit 1 wins
    (said: whether the exit is this one's)."""
    from opmatrix.matrix import load_matrix
    from opmatrix.run import unjudged

    problems = unjudged(folder, load_matrix(matrix_path))
    for line in problems:
        print(f"opmatrix: {line}", file=sys.stderr)
    if problems and said:
        print(f"opmatrix: exit {NOTHING_JUDGED}: nothing was judged where the run was meant to judge",
              file=sys.stderr)
    return NOTHING_JUDGED if problems else 0


def _statuses(flag: str, text: str) -> frozenset[str]:
    chosen = frozenset(s.strip() for s in text.split(",") if s.strip())
    unknown = chosen - set(status.ALL)
    if unknown:
        raise UsageError(f"{flag} {text}: unknown status {', '.join(sorted(unknown))}; statuses: "
                         f"{', '.join(status.ALL)}")
    return chosen


def _failed_exit(folder: Path, fail_on: frozenset[str]) -> int:
    """1 when any row of the run has a status in fail_on (CI gates on it), else 0."""
    from opmatrix.store import ResultStore

    latest = {r.key(): r for r in ResultStore(folder, create=False).results()}  # a redone job's last row counts
    failed = [r for r in latest.values() if r.status in fail_on]
    if failed:
        counts = {}
        for r in failed:
            counts[r.status] = counts.get(r.status, 0) + 1
        print(f"opmatrix: {len(failed)} row(s) failed ({', '.join(f'{s} {n}' for s, n in sorted(counts.items()))}); "
              f"exit 1 (choose the statuses with --fail-on)", file=sys.stderr)
        return 1
    return 0


def _cmd_deployments(args) -> int:
    from opmatrix.upgrade import deployments as deploy
    from opmatrix.store import known_runs, run_dir

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
    kernels = None if args.runs else set(_project_plugins().kernels())
    rows = deploy.deployments(folders, kernels=kernels, since=since, last=args.last)
    if not rows:
        raise UsageError(f"no verdicts in {', '.join(str(f) for f in folders) or reports}: verdicts come from runs "
                         "timed in rounds (opmatrix run writes verdicts.json)")
    print(deploy.to_json(rows) if args.json else deploy.markdown(rows))
    return 0


def _project_plugins():
    """The kernels and backends of the project opmatrix runs in: shipped, installed packages', the project's own."""
    from opmatrix.incell import plugins

    return plugins.discover(paths.BUILTIN_KERNELS, paths.BUILTIN_BACKENDS, paths.KERNELS, paths.BACKENDS)


def _cmd_compare(args) -> int:
    """Upgrade risk from stored runs: one run of a matrix with [[compare]] (paired), or two runs (unpaired)."""
    from opmatrix.store import load_run, run_dir
    from opmatrix.upgrade import compare

    if len(args.runs) > 2:
        raise UsageError(f"{len(args.runs)} runs named: compare takes one run (its paired comparisons) or two "
                         "(baseline run, candidate run)")
    reports = Path(args.reports)
    folders = [run_dir(r, reports) for r in args.runs]
    frames = [load_run(f) for f in folders]
    min_speedup = _manifest(folders[-1]).acceptance.min_speedup
    if args.baseline_device or args.candidate_device:
        comparisons = [_cross_host(args, frames, folders, min_speedup)]
    elif len(frames) == 1:
        pairs = [p for p in compare.declared_pairs(_manifest(folders[0]).compare, frames[0])
                 if args.baseline in (None, p[0]) and args.candidate in (None, p[1])]
        if not pairs:
            raise UsageError(f"run {folders[0].name} has no paired toolchain comparison"
                             + (f" of {args.baseline or '*'} -> {args.candidate or '*'}" if args.baseline or
                                args.candidate else "")
                             + ": declare [[compare]] baseline/candidate in its matrix, or name two runs for an "
                             "unpaired comparison (opmatrix compare RUN_A RUN_B)")
        manifest = _manifest(folders[0])
        comparisons = [compare.compare_paired(frames[0], b, c, min_speedup, folders[0].name, manifest)
                       for b, c in pairs]
    else:
        try:
            comparisons = [compare.compare_unpaired(frames[0], frames[1], args.baseline, args.candidate, min_speedup,
                                                    [f.name for f in folders])]
        except compare.CompareError as exc:
            raise UsageError(str(exc)) from None
    if args.junit:
        Path(args.junit).write_text(compare.junit_xml(comparisons, args.strict), encoding="utf-8")
    if args.html is not None:
        _write_compare_page(comparisons, args.html, folders)
    print(compare.to_json(comparisons) if args.json else compare.markdown(comparisons))
    return compare.exit_code(comparisons, args.strict)


def _cross_host(args, frames, folders, min_speedup: float):
    """One run's baseline device against its candidate device (a driver canary), with a host A/A when named."""
    from opmatrix.upgrade import cross_host

    if len(frames) != 1 or not (args.baseline_device and args.candidate_device):
        raise UsageError("a comparison across hosts reads one run and names both sides: opmatrix compare RUN "
                         "--baseline-device DEVICE --candidate-device DEVICE [--host-aa-device DEVICE]")
    try:
        return cross_host.compare_hosts(frames[0], args.baseline_device, args.candidate_device, min_speedup,
                                        folders[0].name, args.host_aa_device, args.baseline)
    except cross_host.CrossHostError as exc:
        raise UsageError(str(exc)) from None


def _write_compare_page(comparisons, html: str, folders: list[Path]) -> None:
    """comparison.html at the path given, else in the (candidate) run folder: comparison.html for one run,
    comparison-vs-<baseline run>.html for two; its path on stderr (stdout carries the Markdown or JSON)."""
    from opmatrix.report.html.compare_page import write_compare_page
    from opmatrix.store import COMPARISON

    default = f"{COMPARISON}.html" if len(folders) == 1 else f"{COMPARISON}-vs-{folders[0].name}.html"
    path = Path(html) if html else folders[-1] / default
    try:
        write_compare_page(comparisons, path, "opmatrix compare: " + " vs ".join(f.name for f in folders))
    except OSError as exc:
        raise UsageError(f"--html {path}: cannot write it ({exc.strerror or exc}); name a writable file") from None
    print(f"comparison page: {path}", file=sys.stderr)


def _manifest(folder: Path):
    from opmatrix.store import ResultStore

    return ResultStore(folder, create=False).manifest()


def _cmd_host_resources(args) -> int:
    from opmatrix.scheduling import hosts, resources

    devices = hosts.detect_local()
    if args.json:
        json.dump({"resources": resources.host_resources(devices), "labels": resources.host_labels(devices),
                   "num_gpus": sum(1 for d in devices if d.vendor != "cpu")}, sys.stdout, indent=1)
        print()
    else:
        print(resources.ray_start_args(devices))
    return 0


def _cmd_report(args) -> int:
    from rich.console import Console

    from opmatrix.report.build import finish
    from opmatrix.store import REPORT_HTML, RESULTS_JSONL, ResultStore, run_dir

    reports = Path(args.reports)
    folder = run_dir(args.run, reports)
    if not (folder / RESULTS_JSONL).is_file():
        raise UsageError(f"{folder}: no {RESULTS_JSONL} in this folder, so there is nothing to report (a run folder "
                         f"is written by `opmatrix run`); runs under {reports}: {_known_runs(reports)}")
    store = ResultStore(folder)
    with store.lock("opmatrix report", "then report it"):  # never from a run still writing it
        finish(store, Console(), strict=args.strict)
    if args.open:
        import webbrowser

        webbrowser.open((folder / REPORT_HTML).resolve().as_uri())
    return 0


def _cmd_plan(args) -> int:
    from opmatrix import plan
    from opmatrix.matrix import load_matrix

    matrix = load_matrix(paths.matrix_file(args.matrix))
    plan.check_plugins(matrix)
    rivals = {p.rival.cell.id: p.cell.id for p in plan.cell_plans(matrix, "plan", paths.SCRATCH) if p.rival}
    specs = plan.plan_cells(matrix)
    cells = [{"cell": c.id, "session": c.session, "jobs": [_plan_job(matrix, j) for j in plan.plan_jobs(matrix, c)],
              "timed_with": rivals.get(c.id, "")} for c in specs]
    if args.json:
        json.dump(cells, sys.stdout, indent=1)
        print()
    else:
        for spec, c in zip(specs, cells):
            paired = f"   in the same rounds as {c['timed_with']} ([[compare]] candidate)" if c["timed_with"] else ""
            print(f"{c['cell']:<32} {len(c['jobs']):>4} jobs   nox session {c['session']}{paired}")
            for line in plan.job_lines(matrix, spec):  # every kernel x backend[variant], so the count adds up
                print(line)
        for line in plan.plugin_lines(matrix):  # plugins not shipped with opmatrix, and the project's overrides
            print(line)
        for line in plan.workload_lines(matrix):  # workloads defined by their parameters, and their files
            print(line)
    return 0


def _plan_job(matrix, job) -> dict:
    """A job of `opmatrix plan --json`, with where it comes from (plan.job_origin); one of a workload the matrix
    defines says its parameters and their file."""
    from opmatrix import plan

    out = {k: v for k, v in vars(job).items() if k != "params"}
    out["from"] = plan.job_origin(matrix, job.kernel, job.backend, job.variant)
    if job.params:
        out.update(params=dict(job.params), workload_from=matrix.workload_origin(job.kernel, job.workload))
    return out


def _cmd_hosts(args) -> int:
    from opmatrix.matrix import load_matrix
    from opmatrix.scheduling import fleet, hosts

    devices = load_matrix(paths.matrix_file(args.matrix)).device
    if args.address:
        import ray

        from opmatrix.scheduling.ray_cluster import check_reachable, log_level

        check_reachable(args.address)
        ray.init(address=args.address, log_to_driver=False, logging_level=log_level())
        try:
            lines = fleet.explain_cluster(devices, ray.nodes())
        finally:
            ray.shutdown()
    else:
        lines = fleet.explain(devices, hosts.detect_local())
    print("\n".join(lines))
    return 0


def _subcommand(sub, name: str, summary: str, example: str, func):
    """A subcommand whose --help starts with a one-line description and ends with an example."""
    cmd = sub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".",
                         epilog="example:\n" + example, formatter_class=argparse.RawDescriptionHelpFormatter)
    cmd.set_defaults(func=func)
    return cmd


MATRIX_HELP = ("matrix file: a path, one from the project root (matrix/h200.toml), or a name in matrix/ "
               "(default: matrix/default.toml)")
EXIT_CODES = ("exit codes: 0 done; 1 a row failed (run --fail-on); 2 bad input (matrix, arguments, a locked or "
              "unknown run); 3 the disk filled during a run (the rows before it kept; free space, then --resume); "
              "4 rows were lost from results.jsonl during a run (restored) or planned jobs have no row without a "
              "deadline (named; --resume runs them); 5 no row failed, yet the run judged nothing: a cell's framework "
              "baseline is not installed in its environment (the cell, its nox session and the package to add "
              "named), or jobs ran and no verdict came of them; 130 / 143 interrupted by SIGINT / SIGTERM "
              "(continue with --resume)")


def parser() -> argparse.ArgumentParser:
    from opmatrix import __version__
    from opmatrix.decide.calibration_cli import add_calibration_parser
    from opmatrix.profile.cli import add_profile_parser  # imported here: both import UsageError from this module
    from opmatrix.commands.bisect_cli import add_bisect_parser
    from opmatrix.commands.history_cli import add_history_parser
    from opmatrix.validate.cli import add_validate_parser

    p = argparse.ArgumentParser(prog="opmatrix", description="Run every kernel backend on every device and "
                                "toolchain of a matrix file; store results; report coverage, correctness, speed "
                                "and verdicts.",
                                epilog="example:\n  opmatrix plan matrix/h200.toml\n  opmatrix run matrix/h200.toml "
                                "--run-id h200-nightly\n  opmatrix report h200-nightly\n\n" + EXIT_CODES,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"opmatrix {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for add in (_run_parser, _compare_parser, _deployments_parser, _report_parser, _plan_parser, _hosts_parsers):
        add(sub)
    add_profile_parser(sub, _subcommand)
    add_history_parser(sub, _subcommand)
    add_bisect_parser(sub, _subcommand)
    add_validate_parser(sub, _subcommand)
    add_calibration_parser(sub, _subcommand)
    return p


def _run_parser(sub) -> None:
    r = _subcommand(sub, "run", "run a matrix file: every job in its cell's environment, each result stored as it "
                    "lands, then report.md", "  opmatrix run matrix/h200.toml --run-id h200-nightly --deadline-s 480\n"
                    "  opmatrix run matrix/h200.toml --run-id h200-nightly --resume --redo lost,crashed", _cmd_run)
    r.add_argument("matrix", nargs="?", default=str(paths.DEFAULT_MATRIX), help=MATRIX_HELP)
    r.add_argument("--reports", default=str(paths.REPORTS), help="where run folders go (default: reports/)")
    r.add_argument("--run-id", help="name of the run folder (default: <UTC time>-<matrix name>)")
    r.add_argument("--address", help="Ray cluster to run on (ray://host:10001 or host:6379; default: "
                   "$RAY_ADDRESS, else an embedded local Ray for this run)")
    r.add_argument("--num-gpus", type=int, help="embedded Ray: advertise only the first N local GPUs")
    r.add_argument("--no-ray", action="store_true", help="run this host's cells one after another without Ray")
    r.add_argument("--verbose", action="store_true", help="show Ray's own log lines too (its warnings and notices; "
                   "by default only its errors), as OPMATRIX_RAY_VERBOSE=1 does")
    r.add_argument("--resume", action="store_true", help="continue the run folder named by --run-id: run only the "
                   "jobs it has no result for (or one with a status listed in --redo)")
    r.add_argument("--redo", default=None, help="with --resume: comma-separated statuses to run again "
                   "(default with --resume: lost)")
    r.add_argument("--deadline-s", type=float, help="start no job after this many seconds; the run stays "
                   "resumable (for time-boxed machines)")
    r.add_argument("--keep-scratch", action="store_true", help="keep the run's whole scratch (.opmatrix/RUN: every "
                   "job's logs and compile caches) instead of pruning it after the session")
    r.add_argument("--rebuild", action="store_true", help="build compile-only jobs again instead of reusing the "
                   "rows of an earlier run built from the same sources, environment and target, and start kept "
                   "build caches ([run] build_cache = \"kept\") empty")
    r.add_argument("--fail-on", default=",".join(status.FAILED), help="exit 1 when a row has one of these "
                   f"statuses (default: {','.join(status.FAILED)})")


def _compare_parser(sub) -> None:
    c = _subcommand(sub, "compare", "upgrade risk: a candidate toolchain against the baseline toolchain, row by row "
                    "(coverage, correctness, time, compile time) -> safe / risk / breaks; one run of a matrix with "
                    "[[compare]] is paired, two runs are compared unpaired (weaker)",
                    "  opmatrix compare 20261201-nightly --junit compare.xml\n"
                    "  opmatrix compare 20261130-tl014 20261201-tl015 --strict --json", _cmd_compare)
    c.add_argument("runs", nargs="+", metavar="RUN", help="one run (paired comparisons it holds) or two runs: "
                   "baseline first, candidate second")
    c.add_argument("--baseline", help="toolchain name of the baseline side (default: the only one / every pair)")
    c.add_argument("--candidate", help="toolchain name of the candidate side")
    c.add_argument("--reports", default=str(paths.REPORTS), help="where run folders are (default: reports/)")
    c.add_argument("--baseline-device", help="across hosts (a driver canary): the device of the baseline hosts")
    c.add_argument("--candidate-device", help="across hosts: the device of the canary hosts, compared unpaired")
    c.add_argument("--host-aa-device", help="across hosts: the baseline software on a second baseline host; its "
                   "difference from the first (the host A/A) raises each row's threshold")
    c.add_argument("--json", action="store_true", help="machine-readable output")
    c.add_argument("--junit", metavar="FILE", help="also write JUnit XML, one test case per row, for CI systems")
    c.add_argument("--strict", action="store_true", help="exit 1 on risk too (always on breaks); risk rows fail "
                   "in the JUnit XML")
    c.add_argument("--html", nargs="?", const="", metavar="FILE", help="also write the comparison as one HTML page "
                   "(default FILE: comparison.html in the run folder; comparison-vs-RUN_A.html in RUN_B's for two "
                   "runs)")


def _deployments_parser(sub) -> None:
    d = _subcommand(sub, "deployments", "the supported-deployments table per kernel: for each device and "
                    "toolchain (the versions its cells imported), which backend to ship, from the verdicts of stored "
                    "runs (latest run wins; kernels only tests use are left out)",
                    "  opmatrix deployments\n  opmatrix deployments --since 2026-12-01\n"
                    "  opmatrix deployments 20261201-h200-paired --json", _cmd_deployments)
    d.add_argument("runs", nargs="*", help="run ids or folders (default: every run under reports/)")
    d.add_argument("--reports", default=str(paths.REPORTS), help="where run folders are (default: reports/)")
    d.add_argument("--since", help="only runs started at or after this ISO date or time (UTC), e.g. 2026-11-30")
    d.add_argument("--runs", dest="last", type=int, metavar="N", help="only the latest N runs (after --since)")
    d.add_argument("--json", action="store_true", help="machine-readable output")


def _report_parser(sub) -> None:
    rep = _subcommand(sub, "report", "rebuild results.parquet, verdicts.json, report.md and report.html of a run "
                      "from its results.jsonl", "  opmatrix report 20261130-h200-full --open\n  opmatrix report "
                      "path/to/run-folder --strict", _cmd_report)
    rep.add_argument("run", help="run id (folder under reports/) or a run folder path")
    rep.add_argument("--reports", default=str(paths.REPORTS), help="where run folders are (default: reports/)")
    rep.add_argument("--strict", action="store_true", help="refuse (exit 2) when results.jsonl has lines that are "
                     "not valid rows, instead of reporting from the others and listing them")
    rep.add_argument("--open", action="store_true", help="open report.html in the default web browser")


def _plan_parser(sub) -> None:
    pl = _subcommand(sub, "plan", "show the cells and jobs a matrix file plans, without running anything",
                     "  opmatrix plan matrix/h200.toml\n  opmatrix plan ~/my-matrix.toml --json", _cmd_plan)
    pl.add_argument("matrix", nargs="?", default=str(paths.DEFAULT_MATRIX), help=MATRIX_HELP)
    pl.add_argument("--json", action="store_true", help="machine-readable output")


def _hosts_parsers(sub) -> None:
    h = _subcommand(sub, "hosts", "show this host's devices (or every node's of a Ray cluster), with driver and "
                    "runtime, which matrix devices they satisfy and why the others do not",
                    "  opmatrix hosts matrix/h200.toml\n  opmatrix hosts matrix/fleet.toml --address ray://head:10001",
                    _cmd_hosts)
    h.add_argument("matrix", nargs="?", default=str(paths.DEFAULT_MATRIX), help=MATRIX_HELP)
    h.add_argument("--address", help="a Ray cluster: explain every live node's devices, from what each advertises")
    hr = _subcommand(sub, "host-resources", "print the `ray start` arguments that advertise this host's devices "
                     "(GPU model, arch, vendor, count), detected from the host itself",
                     "  eval ray start --address=HEAD:6379 $(opmatrix host-resources)\n"
                     "  opmatrix host-resources --json", _cmd_host_resources)
    hr.add_argument("--json", action="store_true", help="machine-readable output")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except BaseException as exc:  # noqa: B036 - re-raised below unless it is one of the errors a command reports
        code = _exit_code(exc)
        if code is None:
            raise
        return code
    finally:
        if argv is None:  # the `opmatrix` program (not a caller in this process): the interpreter ends next
            _exit_without_collecting()


def _exit_without_collecting() -> None:
    """Spare the interpreter's exit its cycle collections: after a run it holds pandas, scipy and matplotlib, and
    collecting them at shutdown took 0.2-0.3 s of every command. The objects are only moved out of the collector's
    reach (gc.freeze); every file of the run is written and closed by then, and atexit handlers still run."""
    import gc

    gc.freeze()


def _exit_code(exc: BaseException) -> int | None:
    """The exit code of an error a command reports (its message on stderr), None for any other. The error classes
    are imported here, once something was raised: `opmatrix --help` and `plan` need not import opmatrix.run (numpy,
    rich, the report)."""
    if isinstance(exc, KeyboardInterrupt):  # a second Ctrl-C while the report of an interrupted run is written, or
        print("opmatrix: interrupted by SIGINT", file=sys.stderr)  # one outside a run
        return 130
    if not isinstance(exc, Exception):  # SystemExit and the like
        return None
    from opmatrix.incell.plugins import PluginError
    from opmatrix.interrupts import Interrupted
    from opmatrix.matrix import MatrixError
    from opmatrix.scheduling.dispatch import SchedulerError
    from opmatrix.store import DiskFull, RowsMissing, RunLocked, StoreError

    if isinstance(exc, Interrupted):
        print(f"opmatrix: {exc}; continue with --resume", file=sys.stderr)
        return exc.code
    if isinstance(exc, (DiskFull, RowsMissing)):
        print(f"opmatrix: {exc}", file=sys.stderr)
        return exc.code
    if isinstance(exc, (MatrixError, PluginError, FileNotFoundError, UsageError, RunExists, RunLocked, StoreError,
                        SchedulerError, paths.BadRunId)):
        print(f"opmatrix: {exc}", file=sys.stderr)
        return 2
    return None


if __name__ == "__main__":
    sys.exit(main())
