"""`opmatrix run MATRIX`: run a matrix file (opmatrix.run), then gate on its rows: exit 1 when a row has a status of
--fail-on, 5 when no row failed yet nothing was judged (NOTHING_JUDGED)."""
from __future__ import annotations

import sys
from pathlib import Path

from opmatrix import paths
from opmatrix.commands.common import (RUNS_GO, known_runs, matrix_argument, reports_argument, run_id_argument,
                                     statuses, subcommand)
from opmatrix.core import status
from opmatrix.core.errors import UsageError

NOTHING_JUDGED = 5  # no row failed, yet the run judged nothing it ran (a baseline not installed, no verdict)


def add_parser(sub) -> None:
    r = subcommand(sub, "run", "run a matrix file: every job in its cell's environment, each result stored as it "
                   "lands, then report.md", "  opmatrix run matrix/h200.toml --run-id h200-nightly --deadline-s 480\n"
                   "  opmatrix run matrix/h200.toml --run-id h200-nightly --resume --redo lost,crashed", handle)
    matrix_argument(r)
    reports_argument(r, RUNS_GO)
    run_id_argument(r, "<UTC time>-<matrix name>")
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
    r.add_argument("--profile", choices=["ncu"], help="after its rounds, profile each GPU contestant's call once "
                   "with Nsight Compute in a process of its own: a summary in its row and beside its speed-up in "
                   "the report, the full .ncu-rep in the run folder's profiles/ (as [run] profile = \"ncu\")")
    r.add_argument("--sanitize", action="store_true", help="after its rounds, run each GPU contestant's call once "
                   "under compute-sanitizer memcheck, racecheck and initcheck, every tensor its own cudaMalloc; a "
                   "finding makes the row `unsafe` (as [run] sanitize = true)")
    r.add_argument("--fail-on", default=",".join(status.FAILED), help="exit 1 when a row has one of these "
                   f"statuses (default: {','.join(status.FAILED)})")


def handle(args) -> int:
    from opmatrix.run import run

    if args.run_id is not None:
        paths.check_run_id(args.run_id)
    check_resume(args)
    redo_statuses = redo(args)
    scheduler = _scheduler(args)
    fail_on = statuses("--fail-on", args.fail_on)
    matrix = paths.matrix_file(args.matrix)
    folder = run(matrix, Path(args.reports), args.run_id, scheduler=scheduler, resume=args.resume,
                 redo=redo_statuses, deadline_s=args.deadline_s, keep_scratch=args.keep_scratch, rebuild=args.rebuild,
                 profile=args.profile, sanitize=args.sanitize)
    failed = failed_exit(folder, fail_on)
    unjudged = unjudged_exit(folder, matrix, said=not failed)
    return failed or unjudged  # a failed row's 1 first: CI gates on it


def _scheduler(args):
    if args.no_ray:
        from opmatrix.scheduling.local import LocalScheduler

        return LocalScheduler()
    from opmatrix.scheduling.ray_cluster import RayScheduler

    return RayScheduler(args.address, args.num_gpus, verbose=args.verbose)


def redo(args) -> frozenset[str]:
    """--redo is only meaningful with --resume (it picks which stored rows run again); its default there: lost."""
    if args.redo is None:
        return frozenset({status.LOST})
    if not args.resume:
        raise UsageError(f"--redo {args.redo}: --redo only applies to a resumed run; add --resume --run-id RUN, or "
                         "drop --redo")
    return statuses("--redo", args.redo)


def check_resume(args) -> None:
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
                         f"(runs there: {known_runs(reports)}); drop --resume to start it as a new run")


def failed_exit(folder: Path, fail_on: frozenset[str]) -> int:
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


def unjudged_exit(folder: Path, matrix_path: Path, said: bool = True) -> int:
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
