"""What the subcommands share: how one is declared (a one-line description, an example), the arguments several of
them take (the matrix file, --reports, --run-id, --json), and the lookups their messages and checks use. Defined
once here, so that one flag reads the same in every command that takes it."""
from __future__ import annotations

import argparse
from pathlib import Path

from opmatrix import paths
from opmatrix.core import status
from opmatrix.core.errors import UsageError

MATRIX_HELP = ("matrix file: a path, one from the project root (matrix/h200.toml), or a name in matrix/ "
               "(default: matrix/default.toml)")
RUNS_GO = "where run folders go (default: reports/)"  # --reports of a command that writes a run folder
RUNS_ARE = "where run folders are (default: reports/)"  # --reports of a command that reads stored runs
MACHINE_READABLE = "machine-readable output"


def subcommand(sub, name: str, summary: str, example: str, func) -> argparse.ArgumentParser:
    """A subcommand whose --help starts with a one-line description and ends with an example; `func(args)` runs it
    and returns the exit code."""
    cmd = sub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".",
                         epilog="example:\n" + example, formatter_class=argparse.RawDescriptionHelpFormatter)
    cmd.set_defaults(func=func)
    return cmd


def matrix_argument(p: argparse.ArgumentParser) -> None:
    """The matrix file, optional: matrix/default.toml of the project when not given."""
    p.add_argument("matrix", nargs="?", default=str(paths.DEFAULT_MATRIX), help=MATRIX_HELP)


def reports_argument(p: argparse.ArgumentParser, text: str = RUNS_ARE) -> None:
    p.add_argument("--reports", default=str(paths.REPORTS), help=text)


def run_id_argument(p: argparse.ArgumentParser, default: str, what: str = "name of the run folder") -> None:
    """--run-id: the folder a command writes, named by default after the time and `default`."""
    p.add_argument("--run-id", help=f"{what} (default: {default})")


def json_argument(p: argparse.ArgumentParser, text: str = MACHINE_READABLE) -> None:
    p.add_argument("--json", action="store_true", help=text)


def known_runs(reports: Path) -> str:
    """The run folders under `reports` (those holding results or a manifest), for an error message."""
    from opmatrix.store import MANIFEST, RESULTS_JSONL

    if not reports.is_dir():
        return "none (no such folder)"
    runs = sorted(p.name for p in reports.iterdir() if (p / RESULTS_JSONL).is_file() or (p / MANIFEST).is_file())
    return ", ".join(runs) or "none"


def statuses(flag: str, text: str) -> frozenset[str]:
    """A comma-separated list of row statuses given to `flag`; UsageError naming the vocabulary for an unknown one."""
    chosen = frozenset(s.strip() for s in text.split(",") if s.strip())
    unknown = chosen - set(status.ALL)
    if unknown:
        raise UsageError(f"{flag} {text}: unknown status {', '.join(sorted(unknown))}; statuses: "
                         f"{', '.join(status.ALL)}")
    return chosen


def manifest(folder: Path):
    """A stored run's run.json (RunManifest; an empty one named after the folder where it has none)."""
    from opmatrix.store import ResultStore

    return ResultStore(folder, create=False).manifest()


def project_plugins():
    """The kernels and backends of the project opmatrix runs in: shipped, installed packages', the project's own."""
    from opmatrix.incell import plugins

    return plugins.discover(paths.BUILTIN_KERNELS, paths.BUILTIN_BACKENDS, paths.KERNELS, paths.BACKENDS)
