"""`opmatrix calibration RUN ... [--pairs A:B ...] [--json]`: what the stored runs' intervals cover (A/A coverage,
identical-run agreement; opmatrix.decide.calibration), recomputed from their rounds."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from opmatrix.commands.common import json_argument, reports_argument, subcommand
from opmatrix.core.errors import UsageError
from opmatrix.decide import calibration


def add_parser(sub) -> None:
    c = subcommand(sub, "calibration", "what the stored runs' intervals cover: the share of A/A twins' intervals "
                   "that contain 1.0, and for named pairs of identical runs the rows whose intervals overlap",
                   "  opmatrix calibration reports/*h200* --pairs 20261130-h200-decide-a:20261130-h200-decide-b\n"
                   "  opmatrix calibration 20261130-cpu-default --json", handle)
    c.add_argument("runs", nargs="+", metavar="RUN", help="run ids under --reports, or run folders")
    c.add_argument("--pairs", nargs="*", default=[], metavar="A:B", help="pairs of identical runs whose intervals "
                   "should overlap (run ids or folders; they need not be among RUN)")
    json_argument(c)
    reports_argument(c, "where run ids are found (default: reports/)")


def handle(args) -> int:
    from opmatrix.store import load_run, run_dir

    reports = Path(args.reports)
    pairs = []
    for text in args.pairs:
        a, sep, b = text.partition(":")
        if not sep or not a or not b:
            raise UsageError(f"--pairs {text!r} is not A:B (two run ids or folders joined by a colon)")
        pairs.append((a, b))
    folders = {name: run_dir(name, reports) for name in dict.fromkeys([*args.runs, *(x for p in pairs for x in p)])}
    frames = {name: load_run(folder) for name, folder in folders.items()}
    result = calibration.Calibration([folders[r].name for r in args.runs])
    for run in args.runs:
        result.twins += calibration.twins(frames[run])
        if calibration.without_twin(frames[run]):
            result.no_twin.append(folders[run].name)
    result.pairs = [calibration.pair(frames[a], frames[b], folders[a].name, folders[b].name) for a, b in pairs]
    print(to_json(result) if args.json else markdown(result))
    return 0


def to_json(c: calibration.Calibration) -> str:
    data = asdict(c)
    data["coverage"] = {which or "default": dict(zip(("covered", "twins"), c.coverage(which)))
                        for which in ("", "out", "within")}
    return json.dumps(data, indent=1, sort_keys=True)


def markdown(c: calibration.Calibration) -> str:
    pct = calibration.percent
    lines = [f"# Interval calibration over {len(c.runs)} run(s)", "",
             f"A/A twins whose 95 % interval contains 1.0: {pct(*c.coverage())} as the report computes them; "
             f"{pct(*c.coverage('out'))} leave-one-out (each twin's between-process term from the run's other "
             f"twins only); {pct(*c.coverage('within'))} within the rounds only (no between-process term)."]
    missed = [t for t in c.twins if not t.covers()]
    if missed:
        lines += ["", "Twins whose interval misses 1.0:"]
        lines += [f"- {t.run} {t.kernel} {t.workload} {t.dtype}: {t.estimate:.4f} [{t.lo:.4f}, {t.hi:.4f}] "
                  f"({t.rounds} rounds)" for t in missed]
    for p in c.pairs:
        lines += ["", f"Identical runs {p.run_a} vs {p.run_b}: {p.agree} of {p.compared} rows' intervals overlap "
                  f"({p.agree_within} of {p.compared} within the rounds only)."]
        lines += [f"- apart: {row}" for row in p.apart]
    if c.no_twin:
        lines += ["", "Cannot be re-judged with the between-process term (timed in rounds without an A/A twin): "
                  + ", ".join(c.no_twin)]
    return "\n".join(lines)
