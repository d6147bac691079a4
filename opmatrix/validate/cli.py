"""`opmatrix validate TARGET`: swap chosen kernel implementations into a model step, check its logits against the
unmodified model, time both paired and interleaved, and say per swap whether the microbenchmark's win is confirmed
in the model. Writes reports/<run-id>/validate.md and validate.json and prints the table.

Implementations come from --use KERNEL=BACKEND[VARIANT],... or from a matrix run's verdicts (--from-run RUN: every
wired kernel it adopts an implementation for); the microbenchmark speed-ups from that run, the kernel groups'
shares from a profile (--profile RUN of `opmatrix profile`). torch is imported only when the command runs.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from opmatrix import paths
from opmatrix.core.errors import UsageError
from opmatrix.incell import plugins
from opmatrix.profile import profiler, targets
from opmatrix.store import run_dir

MARKDOWN, JSON = "validate.md", "validate.json"
ALIASES = {"llama": "opmatrix.profile.targets:llama_step"}  # the wired target's short name
DEFAULT_ROUNDS = 10
EXIT_WRONG = 1
EXAMPLE = ("  opmatrix validate llama --preset tiny --use rope=torch-compile,swiglu=torch-compile --rounds 5\n"
           "  opmatrix profile opmatrix.profile.targets:llama_step --preset gpu --run-id llama-h200-profile\n"
           "  opmatrix validate llama --preset gpu --from-run h200-kernels --profile llama-h200-profile\n"
           "  opmatrix validate llama --preset gpu --use rope=triton,rmsnorm=triton --from-run h200-kernels "
           "--profile llama-h200-profile --rounds 20")
HEADERS = ("variant", "logits rel err", "ms / step", "end-to-end gain", "predicted (Amdahl)", "share x micro",
           "verdict", "why")


def add_validate_parser(sub, subcommand) -> None:
    """The `validate` subcommand; `subcommand` is opmatrix.cli._subcommand."""
    p = subcommand(sub, "validate", "test kernels in the model: swap chosen implementations into a model step "
                   "(registry: opmatrix/sites/registry.py), check its logits against the unmodified model, time "
                   "both paired and interleaved, and confirm (or not) each microbenchmark win against the profile's "
                   "Amdahl prediction", EXAMPLE, cmd_validate)
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
    p.add_argument("--reports", default=str(paths.REPORTS), help="where run folders go (default: reports/)")
    p.add_argument("--run-id", help="name of the run folder (default: <UTC time>-validate-<target name>)")
    p.add_argument("--json", action="store_true", help="print validate.json instead of the table")


def cmd_validate(args) -> int:
    from opmatrix.validate import check, sources, swap

    _check_args(args)
    spec = ALIASES.get(args.target, args.target)
    target = targets.load_target(spec)
    step = targets.make_step(target, args.preset, args.device)
    device = targets.step_device(target, step, args.device)
    info = swap.device_info(device)
    found = plugins.discover(paths.BUILTIN_KERNELS, paths.BUILTIN_BACKENDS, Path(args.kernels or paths.KERNELS),
                             Path(args.backends or paths.BACKENDS))
    run = run_dir(args.from_run, Path(args.reports)) if args.from_run else None
    if args.use:
        choices = swap.parse_use(args.use)
    elif run is not None:
        choices = sources.chosen(run, info.vendor, args.run_device)
    else:
        raise UsageError("name the implementations to swap in: --use KERNEL=BACKEND,... (e.g. --use "
                         "rope=torch-compile) or --from-run RUN (the implementations its verdicts adopt)")
    swaps = swap.make_swaps(choices, found, info)
    profile = sources.read_profile(args.profile, Path(args.reports)) if args.profile else None
    folder = paths.new_run_folder(Path(args.reports), args.run_id, "validate", target.name, JSON)
    progress = _progress(args.json)
    progress(f"validate {spec}{' --preset ' + args.preset if args.preset else ''} on {device}: "
             f"{', '.join(s.label for s in swaps)}")
    progress("output check: the unmodified step, twice")
    measured = check.run(step, device, swaps, args.rounds, args.max_rounds or 3 * args.rounds, args.tolerance,
                         progress)
    dtype = next((s.kernel.dtypes[0] for s in swaps if s.kernel.dtypes), measured["dtype"])
    micro = {}
    if run is not None:
        workloads = {s.kernel.choice.kernel: s.kernel.workloads[0] for s in swaps if s.kernel.workloads}
        eager = {s.kernel.choice.kernel: s.sites[0].eager for s in swaps if s.sites[0].eager}
        micro = sources.micro_speedups(run, choices, workloads, dtype, info.vendor, args.run_device,
                                       found.kernel_dir, eager)
    rows, noise = check.decide_rows(measured, lambda sw: _parts(sw, profile, micro, run),
                                    lambda sw: _micro_wins(sw, micro))
    report = _report(spec, args, step, device, swaps, profile, run, rows, noise, dtype)
    text = json.dumps(profiler.finite(report), indent=1, allow_nan=False)
    (folder / JSON).write_text(text + "\n", encoding="utf-8")
    (folder / MARKDOWN).write_text(markdown(report), encoding="utf-8")
    if args.json:
        print(text)
    else:
        print_terminal(report, folder)
    from opmatrix.validate.verdict import WRONG

    return EXIT_WRONG if any(r.verdict == WRONG for r in rows) else 0


def _parts(swaps, profile, micro, run):
    from opmatrix.validate.verdict import Part

    parts = []
    for s in swaps:
        kernel = s.kernel.choice.kernel
        group = s.sites[0].group
        missing = []
        share = profile.shares.get(group, 0.0) if profile else None
        if profile is None:
            missing.append("no profile share (--profile RUN of opmatrix profile)")
        m, why = micro.get(kernel, (None, ""))
        if m is None:
            missing.append(why or f"{kernel}: no microbenchmark speed-up (--from-run RUN)")
        parts.append(Part(kernel, group, share, m, tuple(missing)))
    return parts


def _micro_wins(swaps, micro) -> bool | None:
    known = [micro.get(s.kernel.choice.kernel, (None, ""))[0] for s in swaps]
    if any(m is None for m in known):
        return None
    return all(m.wins for m in known)


def _report(spec, args, step, device, swaps, profile, run, rows, noise, dtype) -> dict:
    import dataclasses

    import torch

    return {"target": spec + (f" --preset {args.preset}" if args.preset else ""),
            "description": getattr(step, "description", ""), "device": device, "dtype": dtype,
            "torch_version": torch.__version__,
            "swaps": [{"use": s.label, "sites": [site.function for site in s.sites],
                       "file": str(s.kernel.impl.__file__)} for s in swaps],
            "profile": profile.source if profile else None,
            "profile_target": profile.target if profile else None,
            "from_run": str(run) if run else None, "noise": noise,
            "rows": [dataclasses.asdict(r) for r in rows]}


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


# --- rendering: one table for validate.md and the terminal ---------------------------------------------------------

def _num(value, fmt: str, none: str = "-") -> str:
    return none if value is None else format(value, fmt)


def table_rows(report: dict) -> list[list[str]]:
    out = []
    for r in report["rows"]:
        gain = (f"{r['gain']:.4f}x [{r['gain_lo']:.4f}, {r['gain_hi']:.4f}] ({r['rounds']} rounds)"
                if r["gain"] is not None else "-")
        parts = "; ".join(f"{p['group']} {_num(p['share'], '.1%', '?')} x {_num(p['micro_speedup'], '.2f', '?')}"
                          for p in r["parts"])
        out.append([r["variant"], _num(r["rel_err"], ".3g", "n/a"), _num(r["median_ms"], ".3f"), gain,
                    _num(r["predicted"], ".4f") + ("x" if r["predicted"] is not None else ""), parts, r["verdict"],
                    r["reason"]])
    return out


def summary_lines(report: dict) -> list[str]:
    n = report["noise"]
    lines = [f"target: {report['target']}: {report['description']}",
             f"device: {report['device']}; {report['dtype']}; torch {report['torch_version']}",
             "swapped in: " + "; ".join(f"{s['use']} at {', '.join(s['sites'])}" for s in report["swaps"]),
             f"unmodified step: {_num(n['baseline_ms'], '.3f')} ms (median of {n['rounds']} rounds; timer: "
             f"{n['timer']})",
             f"A/A (unmodified vs itself, same rounds): {n['aa_text']}; a gain counts above {n['threshold']:.4f}",
             f"output: logits rel error vs the unmodified model, tolerance {report['rows'][0]['tolerance']:g} "
             f"(unmodified run to run: {_num(n['run_to_run_rel_err'], '.3g', 'n/a')})"
             if report["rows"] else "output: nothing checked",
             f"profile (kernel-group shares): {report['profile'] or 'none given (--profile RUN)'}"
             + (f" of {report['profile_target']}" if report["profile_target"] else ""),
             f"microbenchmarks: {report['from_run'] or 'none given (--from-run RUN)'}"]
    micro = {p["kernel"]: p["micro"] for r in report["rows"] for p in r["parts"] if p["micro"]}  # once per kernel
    lines += [f"micro speed-up of {kernel}: {text}" for kernel, text in micro.items()]
    return lines


def markdown(report: dict) -> str:
    from opmatrix.report.markdown import row

    lines = [f"# Validation in the model: {report['target']}", ""] + [f"- {x}" for x in summary_lines(report)]
    lines += ["", "## Swaps", "", row(HEADERS), row(["---"] * len(HEADERS))]
    lines += [row(cells) for cells in table_rows(report)]
    lines += ["", "Gain: median over paired rounds of unmodified / swapped step time (> 1: the swap is faster), 95 % "
              "bootstrap interval. Predicted: Amdahl's 1 / ((1 - s) + s / k) from the profile's kernel-group share s "
              "and the microbenchmark speed-up k (an upper bound where the swap replaces only part of its group). "
              "confirmed: the gain's lower bound is above the A/A threshold and not beyond the prediction; "
              "not confirmed: wins alone, not in the model: the kernel won its microbenchmark but the model shows "
              "no gain beyond the noise."]
    replaced = sorted({x for r in report["rows"] for x in r["replaces"]})
    lines += ["", "What each swap replaces: " + "; ".join(replaced) + "."] if replaced else []
    return "\n".join(lines) + "\n"


def print_terminal(report: dict, folder: Path, console=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from opmatrix.report.terminal import widen

    console = console or Console()
    widen(console)
    for line in summary_lines(report):
        console.print(escape(line), highlight=False)
    table = Table(title="Swaps in the model (gain: unmodified / swapped, paired rounds)")
    for header in HEADERS:
        table.add_column(escape(header), overflow="fold")
    for cells in table_rows(report):
        style = "bold" if cells[HEADERS.index("verdict")] == "confirmed" else None
        table.add_row(*map(escape, cells), style=style)
    console.print(table)
    console.print(escape(f"wrote {folder / MARKDOWN}, {folder / JSON}"), highlight=False)
