"""`opmatrix plan [MATRIX]`: the cells and jobs a matrix file plans (opmatrix.plan), without running anything: a
line per cell and per kernel x backend[variant], or the jobs as JSON."""
from __future__ import annotations

import json
import sys

from opmatrix import paths
from opmatrix.commands.common import json_argument, matrix_argument, subcommand


def add_parser(sub) -> None:
    pl = subcommand(sub, "plan", "show the cells and jobs a matrix file plans, without running anything",
                    "  opmatrix plan matrix/h200.toml\n  opmatrix plan ~/my-matrix.toml --json", handle)
    matrix_argument(pl)
    json_argument(pl)


def handle(args) -> int:
    from opmatrix import plan
    from opmatrix.matrix import load_matrix

    matrix = load_matrix(paths.matrix_file(args.matrix))
    plan.check_plugins(matrix)
    rivals = {p.rival.cell.id: p.cell.id for p in plan.cell_plans(matrix, "plan", paths.SCRATCH) if p.rival}
    specs = plan.plan_cells(matrix)
    cells = [{"cell": c.id, "session": c.session, "jobs": [_job(matrix, j) for j in plan.plan_jobs(matrix, c)],
              "timed_with": rivals.get(c.id, "")} for c in specs]
    if args.json:
        json.dump(cells, sys.stdout, indent=1)
        print()
        return 0
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


def _job(matrix, job) -> dict:
    """A job of `opmatrix plan --json`, with where it comes from (plan.job_origin); one of a workload the matrix
    defines says its parameters and their file."""
    from opmatrix import plan

    out = {k: v for k, v in vars(job).items() if k != "params"}
    out["from"] = plan.job_origin(matrix, job.kernel, job.backend, job.variant)
    if job.params:
        out.update(params=dict(job.params), workload_from=matrix.workload_origin(job.kernel, job.workload))
    return out
