"""The `opmatrix` command: its parser, assembled from the subcommands of opmatrix.commands (one module each, in the
order --help lists them), and the exit codes of the errors a command reports. Nothing else lives here: each verb's
arguments and work are its module's, and the arguments several verbs share are opmatrix.commands.common's."""
from __future__ import annotations

import argparse
import sys

from opmatrix import paths
from opmatrix.commands import (bisect, calibration, compare, deployments, history, host_resources, hosts, plan,
                               profile, report, run, validate, wheels)
from opmatrix.core.errors import RunExists, UsageError

COMMANDS = (run, compare, deployments, report, plan, hosts, host_resources, profile, history, bisect, validate,
            calibration, wheels)
EXIT_CODES = ("exit codes: 0 done; 1 a row failed (run --fail-on); 2 bad input (matrix, arguments, a locked or "
              "unknown run); 3 the disk filled during a run (the rows before it kept; free space, then --resume); "
              "4 rows were lost from results.jsonl during a run (restored) or planned jobs have no row without a "
              "deadline (named; --resume runs them); 5 no row failed, yet the run judged nothing: a cell's framework "
              "baseline is not installed in its environment (the cell, its nox session and the package to add "
              "named), or jobs ran and no verdict came of them; 130 / 143 interrupted by SIGINT / SIGTERM "
              "(continue with --resume)")


def parser() -> argparse.ArgumentParser:
    from opmatrix import __version__

    p = argparse.ArgumentParser(prog="opmatrix", description="Run every kernel backend on every device and "
                                "toolchain of a matrix file; store results; report coverage, correctness, speed "
                                "and verdicts.",
                                epilog="example:\n  opmatrix plan matrix/h200.toml\n  opmatrix run matrix/h200.toml "
                                "--run-id h200-nightly\n  opmatrix report h200-nightly\n\n" + EXIT_CODES,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"opmatrix {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return p


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
    are imported here, once something was raised: a command that does not need the store, the schedulers or the
    matrix loader never imports them for this."""
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
