"""The files `opmatrix profile` writes into its run folder (profile.md, profile.json, workloads.toml, beside
torch.profiler's trace.json) and its kernel-group table in the terminal."""
from __future__ import annotations

from pathlib import Path

from opmatrix.profile import profiler, workloads

TRACE, MARKDOWN, JSON = "trace.json", "profile.md", "profile.json"


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
