"""`opmatrix profile TARGET`: profile one model step, write reports/<run-id>/ (trace.json, profile.md, profile.json,
and workloads.toml: the shapes the step called each kernel with, for a matrix's `workloads_from`) and print the
kernel-group table.

torch (and transformers for llama_step) are imported only when the command runs, so the rest of the command line
works without them.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

from opmatrix import paths
from opmatrix.core.errors import UsageError
from opmatrix.incell import plugins
from opmatrix.profile import profiler, targets, workloads

TRACE, MARKDOWN, JSON = "trace.json", "profile.md", "profile.json"
EXAMPLE = ("  opmatrix profile opmatrix.profile.targets:llama_step --preset tiny\n"
           "  opmatrix profile opmatrix.profile.targets:llama_step --preset gpu --steps 10 --run-id llama-h200\n"
           "  opmatrix profile path/to/my_step.py --device cuda --json")


def add_profile_parser(sub, subcommand) -> None:
    """The `profile` subcommand; `subcommand` is opmatrix.cli._subcommand."""
    p = subcommand(sub, "profile", "profile one model step with torch.profiler: ops grouped by the kernel that would "
                   "replace them, each group's share of the step, Amdahl gains, and which are worth a custom kernel",
                   EXAMPLE, cmd_profile)
    p.add_argument("target", help="module:function returning a zero-argument step (opmatrix.profile.targets:"
                   "llama_step, opmatrix.profile.targets:block_step), or a path to a script defining step()")
    p.add_argument("--preset", help="the target's preset: tiny (CPU, seconds) or gpu (bf16, cuda) for the shipped "
                   "targets (default: the target's own, gpu for those)")
    p.add_argument("--device", help="cpu, cuda or cuda:N (default: the preset's; a script's DEVICE, else cuda where "
                   "there is one)")
    p.add_argument("--steps", type=int, default=profiler.DEFAULT_STEPS, help="profiled steps, after "
                   f"{profiler.DEFAULT_WARMUP} warm-up steps (default: {profiler.DEFAULT_STEPS})")
    p.add_argument("--threshold", type=float, default=profiler.DEFAULT_THRESHOLD, help="a kernel group under this "
                   f"share of the step is not worth a custom kernel (default: {profiler.DEFAULT_THRESHOLD})")
    p.add_argument("--reports", default=str(paths.REPORTS), help="where run folders go (default: reports/)")
    p.add_argument("--run-id", help="name of the run folder (default: <UTC time>-profile-<target name>)")
    p.add_argument("--json", action="store_true", help="print profile.json instead of the table")


def cmd_profile(args) -> int:
    _check_numbers(args)
    _check_torch(args.target)
    target = targets.load_target(args.target)
    step = targets.make_step(target, args.preset, args.device)
    device = targets.step_device(target, step, args.device)
    folder = paths.new_run_folder(Path(args.reports), args.run_id, "profile", target.name, JSON)
    observed = workloads.observe(step, plugins.discover(paths.BUILTIN_KERNELS, paths.BUILTIN_BACKENDS, paths.KERNELS))
    seen = workloads.name_them(observed, workloads.workload_name(target.name, args.preset))
    profile = profiler.profile_step(step, device, args.steps, args.threshold, trace_path=folder / TRACE,
                                    target=target.spec + (f" --preset {args.preset}" if args.preset else ""),
                                    description=getattr(step, "description", ""))
    write_reports(folder, profile, seen, observed)
    if args.json:
        print(profiler.to_json(profile))
    else:
        print_terminal(profile, folder, seen, observed)
    return 0


def _check_numbers(args) -> None:
    if args.steps < 1:
        raise UsageError(f"--steps {args.steps}: profile at least one step")
    if not 0 <= args.threshold < 1:
        raise UsageError(f"--threshold {args.threshold}: a share of the step, from 0 to below 1 (0.05 is 5 %)")


def _check_torch(spec: str) -> None:
    if importlib.util.find_spec("torch") is None:
        raise UsageError(f"target {spec}: opmatrix profile needs torch in this environment (pip install torch; "
                         "pip install opmatrix[model] for llama_step's transformers)")


def write_reports(folder: Path, profile: profiler.Profile, seen: list[workloads.Seen],
                  observed: workloads.Observed) -> None:
    lines = workloads.summary(seen, observed) or ["none: the step called no model site a kernel replaces"]
    (folder / MARKDOWN).write_text(profiler.markdown(profile) + f"\n## Workloads ({workloads.FILE})\n\n"
                                   + "".join(f"- {line}\n" for line in lines), encoding="utf-8")
    (folder / JSON).write_text(profiler.to_json(profile) + "\n", encoding="utf-8")
    header = [f"Workloads of `opmatrix profile {profile.target}`:",
              f"the shapes the step called each kernel with (one observed step; device {profile.device}, torch "
              f"{profile.torch_version})."]
    (folder / workloads.FILE).write_text(workloads.fragment(seen, observed, header, _vendor(profile.device)),
                                         encoding="utf-8")


def _vendor(device: str) -> str:
    """The matrix vendor of the profiled device, for the example in workloads.toml."""
    if not device.startswith("cuda"):
        return "cpu"
    import torch

    return "amd" if getattr(torch.version, "hip", None) else "nvidia"


def print_terminal(profile: profiler.Profile, folder: Path, seen: list[workloads.Seen], observed: workloads.Observed,
                   console=None) -> None:
    """The kernel-group table of profile.md, as a rich table, and where the files are."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from opmatrix.report.terminal import widen

    console = console or Console()
    widen(console)
    for line in profiler.summary_lines(profile):
        console.print(escape(line), highlight=False)
    table = Table(title="Kernel groups (Amdahl: whole-step gain if the group ran k times faster)")
    for header in profiler.HEADERS:
        table.add_column(escape(header), overflow="fold")
    for row in profiler.table_rows(profile):
        style = "bold" if row[profiler.HEADERS.index("worth it?")] == profiler.WORTH else None
        table.add_row(*map(escape, row), style=style)
    console.print(table)
    for line in workloads.summary(seen, observed):
        console.print(escape(f"workload {line}"), highlight=False)
    console.print(escape(f"wrote {folder / MARKDOWN}, {folder / JSON}, {folder / TRACE} (open in "
                         f"chrome://tracing or ui.perfetto.dev), {folder / workloads.FILE} (a matrix's "
                         "workloads_from)"), highlight=False)
