"""`opmatrix compare RUN [RUN]`: upgrade risk from stored runs (opmatrix.upgrade.compare): one run of a matrix with
[[compare]] (paired), two runs (unpaired), or one run's hosts against each other (--baseline-device and
--candidate-device: opmatrix.upgrade.cross_host). Reads stored runs only; exit 1 on breaks (and risk with
--strict)."""
from __future__ import annotations

import sys
from pathlib import Path

from opmatrix.commands.common import json_argument, manifest, reports_argument, subcommand
from opmatrix.core.errors import UsageError


def add_parser(sub) -> None:
    c = subcommand(sub, "compare", "upgrade risk: a candidate toolchain against the baseline toolchain, row by row "
                   "(coverage, correctness, time, compile time) -> safe / risk / breaks; one run of a matrix with "
                   "[[compare]] is paired, two runs are compared unpaired (weaker)",
                   "  opmatrix compare 20261201-nightly --junit compare.xml\n"
                   "  opmatrix compare 20261130-tl014 20261201-tl015 --strict --json", handle)
    c.add_argument("runs", nargs="+", metavar="RUN", help="one run (paired comparisons it holds) or two runs: "
                   "baseline first, candidate second")
    c.add_argument("--baseline", help="toolchain name of the baseline side (default: the only one / every pair)")
    c.add_argument("--candidate", help="toolchain name of the candidate side")
    reports_argument(c)
    c.add_argument("--baseline-device", help="across hosts (a driver canary): the device of the baseline hosts")
    c.add_argument("--candidate-device", help="across hosts: the device of the canary hosts, compared unpaired")
    c.add_argument("--host-aa-device", help="across hosts: the baseline software on a second baseline host; its "
                   "difference from the first (the host A/A) raises each row's threshold")
    json_argument(c)
    c.add_argument("--junit", metavar="FILE", help="also write JUnit XML, one test case per row, for CI systems")
    c.add_argument("--strict", action="store_true", help="exit 1 on risk too (always on breaks); risk rows fail "
                   "in the JUnit XML")
    c.add_argument("--html", nargs="?", const="", metavar="FILE", help="also write the comparison as one HTML page "
                   "(default FILE: comparison.html in the run folder; comparison-vs-RUN_A.html in RUN_B's for two "
                   "runs)")


def handle(args) -> int:
    """Upgrade risk from stored runs: one run of a matrix with [[compare]] (paired), or two runs (unpaired)."""
    from opmatrix.store import load_run, run_dir
    from opmatrix.upgrade import compare

    if len(args.runs) > 2:
        raise UsageError(f"{len(args.runs)} runs named: compare takes one run (its paired comparisons) or two "
                         "(baseline run, candidate run)")
    reports = Path(args.reports)
    folders = [run_dir(r, reports) for r in args.runs]
    frames = [load_run(f) for f in folders]
    min_speedup = manifest(folders[-1]).acceptance.min_speedup
    if args.baseline_device or args.candidate_device:
        comparisons = [_cross_host(args, frames, folders, min_speedup)]
    elif len(frames) == 1:
        comparisons = _paired(args, frames[0], folders[0], min_speedup)
    else:
        try:
            comparisons = [compare.compare_unpaired(frames[0], frames[1], args.baseline, args.candidate, min_speedup,
                                                    [f.name for f in folders])]
        except compare.CompareError as exc:
            raise UsageError(str(exc)) from None
    if args.junit:
        Path(args.junit).write_text(compare.junit_xml(comparisons, args.strict), encoding="utf-8")
    if args.html is not None:
        _write_page(comparisons, args.html, folders)
    print(compare.to_json(comparisons) if args.json else compare.markdown(comparisons))
    return compare.exit_code(comparisons, args.strict)


def _paired(args, frame, folder: Path, min_speedup: float) -> list:
    """The paired comparisons one run holds ([[compare]] of its matrix), those --baseline / --candidate name."""
    from opmatrix.upgrade import compare

    stored = manifest(folder)
    pairs = [p for p in compare.declared_pairs(stored.compare, frame)
             if args.baseline in (None, p[0]) and args.candidate in (None, p[1])]
    if not pairs:
        raise UsageError(f"run {folder.name} has no paired toolchain comparison"
                         + (f" of {args.baseline or '*'} -> {args.candidate or '*'}" if args.baseline or
                            args.candidate else "")
                         + ": declare [[compare]] baseline/candidate in its matrix, or name two runs for an "
                         "unpaired comparison (opmatrix compare RUN_A RUN_B)")
    return [compare.compare_paired(frame, b, c, min_speedup, folder.name, stored) for b, c in pairs]


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


def _write_page(comparisons, html: str, folders: list[Path]) -> None:
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
