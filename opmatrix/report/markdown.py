"""report.md: the sections as GitHub Markdown tables (tabulate).

Cells carry text from results (error messages, versions, configurations). A `|` in one would start a new column,
a newline would end the table and a control character would act on the terminal of whoever `cat`s the file, so
every cell, header and bullet is made table-safe (opmatrix.mdtable, one place for every Markdown table).
"""
from __future__ import annotations

from pathlib import Path

from opmatrix.manifest import RunManifest
from opmatrix.mdtable import cell, inline, row, table  # noqa: F401 (cell, row: re-exported)
from opmatrix.report.sections import sections


def header(df, manifest: RunManifest) -> list[str]:
    lines = [f"# opmatrix run `{manifest.run_id}`", ""]
    if manifest.description.strip():  # the matrix's description: what the run is for, in its author's words
        lines += [inline(manifest.description.strip()), ""]
    for device, text in sorted(manifest.devices.items()):  # each [[device]]'s own description
        lines += [f"device `{inline(device)}`: {inline(text.strip())}", ""]
    lines += [f"matrix `{manifest.matrix}` · started {manifest.started_at} · "
             f"finished {manifest.finished_at} · {len(df)} results "
             f"({', '.join(f'{s} {n}' for s, n in df.status.value_counts().items())})"]
    left = manifest.planned_jobs - len(df)
    if left > 0:
        why = (f"the run was interrupted by {manifest.interrupted}" if manifest.interrupted
               else "the run stopped at its deadline")
        lines += ["", f"**{left} of {manifest.planned_jobs} planned jobs have no result yet** ({why}; "
                      "`opmatrix run ... --resume` continues it)"]
    if len(manifest.sessions) > 1:
        lines += ["", f"run in {len(manifest.sessions)} sessions (--resume): " + "; ".join(
            f"{s.started_at} {s.jobs} jobs" for s in manifest.sessions)]
    return lines + [""]


def markdown(df, manifest: RunManifest, verdicts=None) -> str:
    lines = header(df, manifest)
    for sec in sections(df, verdicts):
        if sec.optional and not sec.rows:
            continue
        lines += [f"## {inline(sec.title)}", ""]
        if sec.note:
            lines += [inline(sec.note), ""]
        lines += [table(sec.headers, sec.rows) if sec.rows else "(none)", ""]
        lines += [f"- {inline(e)}" for e in sec.extra] + ([""] if sec.extra else [])
    return "\n".join(lines)


def write_markdown(df, manifest: RunManifest, path: Path, verdicts=None) -> Path:
    path.write_text(markdown(df, manifest, verdicts), encoding="utf-8")
    return path
