"""Subcommands of `opmatrix` that live in modules of their own, above the library they call (decide, upgrade,
report, the run): each adds its parser (`add_<verb>_parser(sub, subcommand)`) and does its work; opmatrix.cli wires
them in. Nothing below this package imports it."""
