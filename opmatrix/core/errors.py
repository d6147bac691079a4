"""Errors every layer may raise. Here, below them all, so that a command module and the library it calls share one
class without importing the command line (opmatrix.cli catches them and exits 2)."""


class UsageError(Exception):
    """Arguments that do not fit together, or a name that matches nothing: the message says what to do instead."""


class RunExists(Exception):
    """The run folder already holds results and --resume was not given, or --resume names no run."""
