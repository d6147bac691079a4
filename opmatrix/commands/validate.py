"""`opmatrix validate TARGET`: swap chosen kernel implementations into a model step, check its logits against the
unmodified model, time both paired and interleaved, and say per swap whether the microbenchmark's win is confirmed
in the model. Writes reports/<run-id>/validate.md and validate.json and prints the table.

Implementations come from --use KERNEL=BACKEND[VARIANT],... or from a matrix run's verdicts (--from-run RUN: every
wired kernel it adopts an implementation for); the microbenchmark speed-ups from that run, the kernel groups'
shares from a profile (--profile RUN of `opmatrix profile`). The swaps, the measurement and the verdicts are
opmatrix.validate's; validate.json, validate.md and the table opmatrix.validate.report's. torch is imported only when
the command runs.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from opmatrix import paths
from opmatrix.commands.common import RUNS_GO, json_argument, reports_argument, run_id_argument, subcommand
from opmatrix.core.errors import UsageError
from opmatrix.incell import plugins
from opmatrix.profile import targets
from opmatrix.store import run_dir

ALIASES = {"llama": "opmatrix.profile.targets:llama_step"}  # the wired target's short name
DEFAULT_ROUNDS = 10
EXIT_WRONG = 1
EXAMPLE = ("  opmatrix validate llama --preset tiny --use rope=torch-compile,swiglu=torch-compile --rounds 5\n"
           "  opmatrix profile opmatrix.profile.targets:llama_step --preset gpu --run-id llama-h200-profile\n"
           "  opmatrix validate llama --preset gpu --from-run h200-kernels --profile llama-h200-profile\n"
           "  opmatrix validate llama --preset gpu --use rope=triton,rmsnorm=triton --from-run h200-kernels "
           "--profile llama-h200-profile --rounds 20")


def add_parser(sub) -> None:
    p = subcommand(sub, "validate", "test kernels in the model: swap chosen implementations into a model step "
                   "(registry: opmatrix/sites/registry.py), check its logits against the unmodified model, time "
                   "both paired and interleaved, and confirm (or not) each microbenchmark win against the profile's "
                   "Amdahl prediction", EXAMPLE, handle)
    p.add_argument("target", help="llama (opmatrix.profile.targets:llama_step), or a target as opmatrix profile "
                   "takes it (module:function, or a script defining step()) whose model uses the registry's sites")
    p.add_argument("--preset", help="the target's preset: tiny (CPU, seconds) or gpu (bf16, cuda)")
    p.add_argument("--device", help="cpu, cuda or cuda:N (default: the preset's)")
    p.add_argument("--use", help="implementations to swap in: KERNEL=BACKEND[VARIANT],... (e.g. rope=triton,"
                   "swiglu=tilelang[tuned]); default: what --from-run's verdicts adopt")
    p.add_argument("--from-run", metavar="RUN", help="a matrix run (opmatrix run): its verdicts choose the "
                   "implementations (without --use), its rows give their microbenchmark speed-ups")
    p.add_argument("--run-device", help="the run's device id validate stands for (default: the run's only device "
                   "of this device's vendor)")
    p.add_argument("--profile", metavar="RUN", help="a profile run (opmatrix profile, same target and preset): "
                   "the kernel groups' shares of the step for the Amdahl prediction")
    p.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help=f"paired rounds, at least 3 (default: "
                   f"{DEFAULT_ROUNDS}; more are added, up to --max-rounds, while an interval straddles a 1 %% gain)")
    p.add_argument("--max-rounds", type=int, help="at most this many rounds (default: 3 x --rounds)")
    p.add_argument("--tolerance", type=float, help="logits relative error allowed against the unmodified model "
                   "(default: 1e-4 float32, 1e-2 float16, 5e-2 bfloat16)")
    p.add_argument("--kernels", help="the project's kernels folder (default: kernels/ in the project, where it "
                   "exists); its kernels win over installed and shipped ones of the same name, as in a run")
    p.add_argument("--backends", help="the project's backend adapters folder (default: backends/ in the project)")
    reports_argument(p, RUNS_GO)
    run_id_argument(p, "<UTC time>-validate-<target name>")
    json_argument(p, "print validate.json instead of the table")


def handle(args) -> int:
    from opmatrix.validate import check, report, sources, swap
    from opmatrix.validate.verdict import WRONG

    _check_args(args)
    spec = ALIASES.get(args.target, args.target)
    target = targets.load_target(spec)
    step = targets.make_step(target, args.preset, args.device)
    device = targets.step_device(target, step, args.device)
    info = swap.device_info(device)
    found = plugins.discover(paths.BUILTIN_KERNELS, paths.BUILTIN_BACKENDS, Path(args.kernels or paths.KERNELS),
                             Path(args.backends or paths.BACKENDS))
    run = run_dir(args.from_run, Path(args.reports)) if args.from_run else None
    choices = _choices(args, run, info)
    swaps = swap.make_swaps(choices, found, info)
    profile = sources.read_profile(args.profile, Path(args.reports)) if args.profile else None
    folder = paths.new_run_folder(Path(args.reports), args.run_id, "validate", target.name, report.JSON)
    progress = _progress(args.json)
    progress(f"validate {spec}{' --preset ' + args.preset if args.preset else ''} on {device}: "
             f"{', '.join(s.label for s in swaps)}")
    progress("output check: the unmodified step, twice")
    measured = check.run(step, device, swaps, args.rounds, args.max_rounds or 3 * args.rounds, args.tolerance,
                         progress)
    dtype = next((s.kernel.dtypes[0] for s in swaps if s.kernel.dtypes), measured["dtype"])
    micro = _micro(args, run, choices, swaps, dtype, info, found)
    rows, noise = check.decide_rows(measured, lambda sw: report.parts(sw, profile, micro, run),
                                    lambda sw: report.micro_wins(sw, micro))
    built = report.build(spec, args.preset, step, device, swaps, profile, run, rows, noise, dtype)
    text = report.write(folder, built)
    if args.json:
        print(text)
    else:
        report.print_terminal(built, folder)
    return EXIT_WRONG if any(r.verdict == WRONG for r in rows) else 0


def _choices(args, run: Path | None, info):
    """The implementations to swap in: --use, else what --from-run's verdicts adopt."""
    from opmatrix.validate import sources, swap

    if args.use:
        return swap.parse_use(args.use)
    if run is not None:
        return sources.chosen(run, info.vendor, args.run_device)
    raise UsageError("name the implementations to swap in: --use KERNEL=BACKEND,... (e.g. --use "
                     "rope=torch-compile) or --from-run RUN (the implementations its verdicts adopt)")


def _micro(args, run: Path | None, choices, swaps, dtype: str, info, found) -> dict:
    """The microbenchmark speed-ups of the swapped kernels in --from-run's run ({} without one)."""
    from opmatrix.validate import sources

    if run is None:
        return {}
    workloads = {s.kernel.choice.kernel: s.kernel.workloads[0] for s in swaps if s.kernel.workloads}
    eager = {s.kernel.choice.kernel: s.sites[0].eager for s in swaps if s.sites[0].eager}
    return sources.micro_speedups(run, choices, workloads, dtype, info.vendor, args.run_device, found.kernel_dir,
                                  eager)


def _check_args(args) -> None:
    if args.rounds < 3:
        raise UsageError(f"--rounds {args.rounds}: an interval needs at least 3 paired rounds")
    if args.max_rounds is not None and args.max_rounds < args.rounds:
        raise UsageError(f"--max-rounds {args.max_rounds} is below --rounds {args.rounds}")
    if args.tolerance is not None and not args.tolerance > 0:
        raise UsageError(f"--tolerance {args.tolerance}: a relative error above 0 (1e-4 is 0.01 %)")
    if args.use and args.from_run is None and args.run_device:
        raise UsageError("--run-device picks a device of --from-run's run; name the run too")
    if importlib.util.find_spec("torch") is None:
        raise UsageError(f"target {args.target}: opmatrix validate needs torch in this environment (pip install "
                         "torch; pip install opmatrix[model] for llama's transformers)")
    for flag, value in (("--kernels", args.kernels), ("--backends", args.backends)):
        if value is not None and not Path(value).is_dir():
            raise UsageError(f"{flag} {value}: no such folder")


def _progress(quiet_stdout: bool):
    """Progress lines on stderr (stdout stays the table, or the JSON)."""
    def say(line: str) -> None:
        print(f"validate: {line}", file=sys.stderr, flush=True)

    return say
