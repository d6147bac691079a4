"""`opmatrix profile TARGET`: profile one model step (opmatrix.profile), write reports/<run-id>/ (trace.json,
profile.md, profile.json, and workloads.toml: the shapes the step called each kernel with, for a matrix's
`workloads_from`: opmatrix.profile.output) and print the kernel-group table.

torch (and transformers for llama_step) are imported only when the command runs, so the rest of the command line
works without them.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

from opmatrix import paths
from opmatrix.commands.common import RUNS_GO, json_argument, reports_argument, run_id_argument, subcommand
from opmatrix.core.errors import UsageError
from opmatrix.incell import plugins
from opmatrix.profile import profiler, targets, workloads
from opmatrix.profile.output import JSON, TRACE, print_terminal, write_reports

EXAMPLE = ("  opmatrix profile opmatrix.profile.targets:llama_step --preset tiny\n"
           "  opmatrix profile opmatrix.profile.targets:llama_step --preset gpu --steps 10 --run-id llama-h200\n"
           "  opmatrix profile path/to/my_step.py --device cuda --json")


def add_parser(sub) -> None:
    p = subcommand(sub, "profile", "profile one model step with torch.profiler: ops grouped by the kernel that would "
                   "replace them, each group's share of the step, Amdahl gains, and which are worth a custom kernel",
                   EXAMPLE, handle)
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
    reports_argument(p, RUNS_GO)
    run_id_argument(p, "<UTC time>-profile-<target name>")
    json_argument(p, "print profile.json instead of the table")


def handle(args) -> int:
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
