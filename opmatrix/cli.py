"""The `opmatrix` command: run a matrix, rebuild a report, show the plan or this host's devices."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from opmatrix import paths
from opmatrix.core import status


class UsageError(Exception):
    """Arguments that do not fit together."""


def _cmd_run(args) -> int:
    from opmatrix.run import run

    if args.no_ray:
        from opmatrix.scheduling.local import LocalScheduler

        scheduler = LocalScheduler()
    else:
        from opmatrix.scheduling.ray_cluster import RayScheduler

        scheduler = RayScheduler(args.address, args.num_gpus)
    if args.resume and not args.run_id:
        raise UsageError("--resume continues a run folder: name it with --run-id")
    redo = frozenset(s.strip() for s in args.redo.split(",") if s.strip())
    unknown = redo - set(status.ALL)
    if unknown:
        raise UsageError(f"--redo {args.redo}: unknown status {', '.join(sorted(unknown))}; statuses: "
                         f"{', '.join(status.ALL)}")
    run(args.matrix, Path(args.reports), args.run_id, scheduler=scheduler, resume=args.resume, redo=redo,
        deadline_s=args.deadline_s)
    return 0


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

    from opmatrix.run import finish
    from opmatrix.store import ResultStore, run_dir

    finish(ResultStore(run_dir(args.run, Path(args.reports))), Console())
    return 0


def _cmd_plan(args) -> int:
    from opmatrix import plan
    from opmatrix.matrix import load_matrix

    matrix = load_matrix(args.matrix)
    plan.check_plugins(matrix)
    cells = [{"cell": c.id, "session": c.session, "jobs": [vars(j) for j in plan.plan_jobs(matrix, c)]}
             for c in plan.plan_cells(matrix)]
    if args.json:
        json.dump(cells, sys.stdout, indent=1)
        print()
    else:
        for c in cells:
            print(f"{c['cell']:<32} {len(c['jobs']):>4} jobs   nox session {c['session']}")
    return 0


def _cmd_hosts(args) -> int:
    from opmatrix.scheduling import hosts
    from opmatrix.matrix import load_matrix

    local = hosts.detect_local()
    assigned = hosts.resolve(load_matrix(args.matrix).device, local)
    for h in local:
        claimed = [d for d, hs in assigned.items() if h in hs]
        print(f"{h.vendor:<7} {h.index or '-':>2}  {h.name}  ({h.arch})  -> {', '.join(claimed) or 'no matrix device'}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="opmatrix", description="Run every kernel backend on every device and "
                                "toolchain of a matrix file; store results; report coverage, correctness, speed.")
    sub = p.add_subparsers(dest="command", required=True)
    default = str(paths.DEFAULT_MATRIX)
    r = sub.add_parser("run", help="run a matrix file (default: matrix/default.toml)")
    r.add_argument("matrix", nargs="?", default=default)
    r.add_argument("--reports", default=str(paths.REPORTS), help="where run folders go (default: reports/)")
    r.add_argument("--run-id", help="name of the run folder (default: <UTC time>-<matrix name>)")
    r.add_argument("--address", help="Ray cluster to run on (ray://host:10001 or host:6379; default: "
                   "$RAY_ADDRESS, else an embedded local Ray for this run)")
    r.add_argument("--num-gpus", type=int, help="embedded Ray: advertise only the first N local GPUs")
    r.add_argument("--no-ray", action="store_true", help="run this host's cells one after another without Ray")
    r.add_argument("--resume", action="store_true", help="continue the run folder named by --run-id: run only the "
                   "jobs it has no result for (or one with a status listed in --redo)")
    r.add_argument("--redo", default="lost", help="with --resume: comma-separated statuses to run again "
                   "(default: lost)")
    r.add_argument("--deadline-s", type=float, help="start no job after this many seconds; the run stays "
                   "resumable (for time-boxed machines)")
    r.set_defaults(func=_cmd_run)
    rep = sub.add_parser("report", help="rebuild results.parquet and report.md of a run from its results.jsonl")
    rep.add_argument("run", help="run id (folder under reports/) or a run folder path")
    rep.add_argument("--reports", default=str(paths.REPORTS))
    rep.set_defaults(func=_cmd_report)
    pl = sub.add_parser("plan", help="show the cells and jobs a matrix file plans, without running anything")
    pl.add_argument("matrix", nargs="?", default=default)
    pl.add_argument("--json", action="store_true", help="machine-readable output")
    pl.set_defaults(func=_cmd_plan)
    h = sub.add_parser("hosts", help="show this host's devices and which matrix devices they satisfy")
    h.add_argument("matrix", nargs="?", default=default)
    h.set_defaults(func=_cmd_hosts)
    hr = sub.add_parser("host-resources", help="print the `ray start` arguments that advertise this host's "
                        "devices (GPU model, arch, vendor, count), detected from the host itself")
    hr.add_argument("--json", action="store_true", help="machine-readable output")
    hr.set_defaults(func=_cmd_host_resources)
    return p


def main(argv: list[str] | None = None) -> int:
    from opmatrix.incell.plugins import PluginError
    from opmatrix.matrix import MatrixError
    from opmatrix.run import Interrupted, RunExists
    from opmatrix.scheduling.dispatch import SchedulerError
    from opmatrix.store import RunLocked, StoreError

    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except Interrupted as exc:
        print(f"opmatrix: {exc}; continue with --resume", file=sys.stderr)
        return exc.code
    except (MatrixError, PluginError, FileNotFoundError, UsageError, RunExists, RunLocked, StoreError,
            SchedulerError) as exc:
        print(f"opmatrix: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
