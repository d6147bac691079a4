"""What `opmatrix validate` writes into its run folder (validate.json, validate.md) and shows in the terminal: the
report of one validation, built from the swaps, the sources of the prediction and the measured rows, and one table
rendered for validate.md and the terminal."""
from __future__ import annotations

import json
from pathlib import Path

from opmatrix.profile import profiler
from opmatrix.validate.verdict import Part

MARKDOWN, JSON = "validate.md", "validate.json"
HEADERS = ("variant", "logits rel err", "ms / step", "end-to-end gain", "predicted (Amdahl)", "share x micro",
           "verdict", "why")


def parts(swaps, profile, micro, run):
    """Each swapped kernel's part of the prediction: its group's share of the step, its microbenchmark speed-up, and
    what is missing for either."""
    out = []
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
        out.append(Part(kernel, group, share, m, tuple(missing)))
    return out


def micro_wins(swaps, micro) -> bool | None:
    """Did every swapped kernel win its microbenchmark (None: one has no speed-up to say)."""
    known = [micro.get(s.kernel.choice.kernel, (None, ""))[0] for s in swaps]
    if any(m is None for m in known):
        return None
    return all(m.wins for m in known)


def build(spec: str, preset: str | None, step, device: str, swaps, profile, run, rows, noise, dtype: str) -> dict:
    """validate.json's content: what was swapped where, against what, and each row's verdict."""
    import dataclasses

    import torch

    return {"target": spec + (f" --preset {preset}" if preset else ""),
            "description": getattr(step, "description", ""), "device": device, "dtype": dtype,
            "torch_version": torch.__version__,
            "swaps": [{"use": s.label, "sites": [site.function for site in s.sites],
                       "file": str(s.kernel.impl.__file__)} for s in swaps],
            "profile": profile.source if profile else None,
            "profile_target": profile.target if profile else None,
            "from_run": str(run) if run else None, "noise": noise,
            "rows": [dataclasses.asdict(r) for r in rows]}


def write(folder: Path, report: dict) -> str:
    """validate.json and validate.md in the run folder; the JSON's text."""
    text = json.dumps(profiler.finite(report), indent=1, allow_nan=False)
    (folder / JSON).write_text(text + "\n", encoding="utf-8")
    (folder / MARKDOWN).write_text(markdown(report), encoding="utf-8")
    return text


# --- rendering: one table for validate.md and the terminal ---------------------------------------------------------

def _num(value, fmt: str, none: str = "-") -> str:
    return none if value is None else format(value, fmt)


def table_rows(report: dict) -> list[list[str]]:
    out = []
    for r in report["rows"]:
        gain = (f"{r['gain']:.4f}x [{r['gain_lo']:.4f}, {r['gain_hi']:.4f}] ({r['rounds']} rounds)"
                if r["gain"] is not None else "-")
        shares = "; ".join(f"{p['group']} {_num(p['share'], '.1%', '?')} x {_num(p['micro_speedup'], '.2f', '?')}"
                          for p in r["parts"])
        out.append([r["variant"], _num(r["rel_err"], ".3g", "n/a"), _num(r["median_ms"], ".3f"), gain,
                    _num(r["predicted"], ".4f") + ("x" if r["predicted"] is not None else ""), shares, r["verdict"],
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
