"""`opmatrix bisect MATRIX --package NAME --good V1 --bad V2` (or `--versions V1,V2,...`): the first version of a
package at which the chosen row goes bad, each probe a paired run against the good version (opmatrix.upgrade.bisect
decides what to probe, opmatrix.commands.bisect_probe runs a probe). Writes bisect.md, bisect.json and
bisect.junit.xml into the bisection's folder (reports/<run-id>/, one run folder per probe inside it) and prints the
Markdown (or the JSON)."""
from __future__ import annotations

from pathlib import Path

from opmatrix import paths
from opmatrix.commands import bisect_probe
from opmatrix.commands.common import json_argument, reports_argument, run_id_argument, subcommand
from opmatrix.core.errors import UsageError
from opmatrix.upgrade import bisect, compare

FILES = ("bisect.md", "bisect.json", "bisect.junit.xml")


def add_parser(sub) -> None:
    b = subcommand(sub, "bisect", "find the first version of a package at which a (kernel, backend, workload, dtype) "
                   "breaks, loses correctness or slows beyond the threshold: each probe that version against the good "
                   "one, paired in the same rounds; a binary search, then a re-check of the answer's neighbours",
                   "  opmatrix bisect matrix/nightly-cpu.toml --package triton --good 3.6.0 --bad 3.9.0\n"
                   "  opmatrix bisect my.toml --package fakeblas --versions 1.0,1.2,1.5,1.7 --backend fb --json\n"
                   "  opmatrix bisect fleet.toml --toolchains stable,canary-1,canary-2 --kernel rmsnorm",
                   handle)
    b.add_argument("matrix", help="matrix file whose device, toolchain and kernel the probes use")
    b.add_argument("--package", help="the package whose versions are bisected (with --toolchains: only a name for "
                   "the bisection)")
    b.add_argument("--good", help="a version known good (needs --bad; the versions between come from the package "
                   "index the toolchain names: its find_links folder, its index, pip's configuration)")
    b.add_argument("--bad", help="a version known (or thought) bad")
    b.add_argument("--versions", help="V1,V2,...: the versions to search, good first, bad last (instead of --good "
                   "/ --bad)")
    b.add_argument("--toolchains", help="T1,T2,...: toolchains of the matrix to search instead of one package's "
                   "versions, good first, bad last (steps of a rollout that changes several things at once: packages, "
                   "Python, environment)")
    for flag, what in (("device", "device id"), ("toolchain", "toolchain the package belongs to"),
                       ("kernel", "kernel"), ("workload", "workload"), ("dtype", "dtype"),
                       ("backend", "backend, or backend[variant]")):
        b.add_argument(f"--{flag}", help=f"the {what} to watch (default: the matrix's only one)")
    b.add_argument("--watch", default=",".join(bisect.WATCH), help="what makes a version bad besides breaking: "
                   f"comma-separated of {', '.join(compare.RISK_KINDS)} (default: {','.join(bisect.WATCH)}; compile "
                   "time is one cold build per side, so only large changes count)")
    b.add_argument("--resolution", type=float, default=bisect.RESOLUTION, help="with time watched, the slowdown "
                   "a probe must be able to see to call a version good: a probe whose noise floor puts its threshold "
                   f"above 1 + this is unknown (default: {bisect.RESOLUTION:g})")
    reports_argument(b, "where the bisection's folder goes (default: reports/)")
    run_id_argument(b, "<UTC time>-bisect-<package>", what="the bisection's folder name")
    b.add_argument("--address", help="run the probes on this Ray cluster (default: this host, without Ray)")
    json_argument(b, "print JSON instead of Markdown")
    b.add_argument("--junit", metavar="FILE", help="also write the JUnit XML here (one test case per probe; a bad "
                   "version fails)")


def handle(args) -> int:
    from rich.console import Console

    from opmatrix.matrix import load_matrix
    from opmatrix.plan import check_plugins

    watch = _check(args)
    m = load_matrix(paths.matrix_file(args.matrix))
    check_plugins(m)
    target, versions = _search(m, args)
    package = None if args.toolchains else args.package  # None: each step is a toolchain of the matrix
    name = args.package or "toolchains"
    run_id = args.run_id or paths.new_run_id(f"bisect-{name}")
    paths.check_run_id(run_id)
    folder = Path(args.reports) / run_id
    if (folder / FILES[1]).exists():
        raise UsageError(f"{folder}: already holds a bisection; choose another --run-id")
    folder.mkdir(parents=True, exist_ok=True)
    console = Console(stderr=True)

    def probe(version: str, role: str) -> bisect.Probe:
        number = len(list(folder.glob("probe-*.toml"))) + 1
        console.print(f"bisect {name}: probe {number}, {version} against {versions[0]} ({role})")
        return bisect_probe.run_probe(m, target, package, versions[0], version, folder, number,
                                      lambda: _scheduler(args.address), watch, console, args.resolution)

    result = bisect.bisect(name, target.label(), versions, probe)
    write(result, folder)
    if args.junit:
        Path(args.junit).write_text(bisect.junit_xml(result), encoding="utf-8")
    print(bisect.to_json(result) if args.json else bisect.markdown(result))
    return bisect.exit_code(result)


def _check(args) -> list[str]:
    """The flags checked against each other before the matrix is read; what makes a version bad (--watch)."""
    ways = [bool(args.versions), bool(args.good or args.bad), bool(args.toolchains)]
    if sum(ways) != 1 or (ways[1] and not (args.good and args.bad)):
        raise UsageError("name what to search, one way: --good V1 --bad V2 (the index's versions between them), "
                         "--versions V1,V2,... (good first, bad last), or --toolchains T1,T2,... (the matrix's "
                         "toolchains, good first, bad last)")
    if not args.toolchains and not args.package:
        raise UsageError("--package: name the package whose versions are searched (or search --toolchains)")
    if not 0 < args.resolution <= 100:
        raise UsageError(f"--resolution {args.resolution:g}: allowed: a fraction above 0 (0.3 for 30 %), at most 100")
    watch = [w.strip() for w in args.watch.split(",") if w.strip()]
    if not watch or set(watch) - set(compare.RISK_KINDS):
        raise UsageError(f"--watch {args.watch}: allowed: comma-separated of {', '.join(compare.RISK_KINDS)}")
    return watch


def _search(m, args) -> tuple[bisect_probe.Target, list[str]]:
    """The row the bisection watches and the versions (or toolchains) it searches, good first, bad last."""
    try:
        steps = bisect_probe.named(m, args.toolchains) if args.toolchains else None
        target = bisect_probe.choose_target(m, None if steps else args.package, args.device,
                                            steps[0] if steps else args.toolchain, args.kernel, args.workload,
                                            args.dtype, args.backend)
        versions = steps or (bisect_probe.listed(args.versions) if args.versions else bisect_probe.between(
            bisect_probe.available_versions(m, target, args.package), args.good, args.bad))
    except bisect_probe.BisectError as exc:
        raise UsageError(str(exc)) from None
    return target, versions


def write(result: bisect.Bisection, folder: Path) -> None:
    for name, text in zip(FILES, (bisect.markdown(result), bisect.to_json(result), bisect.junit_xml(result))):
        (folder / name).write_text(text, encoding="utf-8")


def _scheduler(address: str | None):
    if address:
        from opmatrix.scheduling.ray_cluster import RayScheduler

        return RayScheduler(address)
    from opmatrix.scheduling.local import LocalScheduler

    return LocalScheduler()
