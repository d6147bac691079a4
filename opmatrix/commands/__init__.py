"""The subcommands of `opmatrix`, one module per verb, each with `add_parser(sub)` (its arguments, its one-line
description and example) and `handle(args)` (its work, returning the exit code): run, compare, deployments, report,
plan, hosts, host_resources, profile, history, bisect (with bisect_probe, what a probe runs), validate, calibration.
The arguments several verbs share are declared once, in common.py. opmatrix.cli assembles the parser from them and
maps the errors they raise to exit codes.

A verb calls the library below it (the run, the report build, decide, upgrade, profile, validate, the store) and
prints what it shows; what it writes into a run folder is the library's. Nothing below this package imports it.
"""
