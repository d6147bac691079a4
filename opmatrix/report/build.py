"""A run's report, built from its store alone: the rows consolidated (results.parquet), the verdicts of a run timed in
rounds (verdicts.json), report.md, report.html, the terminal tables and, for a matrix with [[compare]] or
[[compare_hosts]], the upgrade verdicts (comparison.*). The one ending of `opmatrix run` and `opmatrix report`
(`finish`); it never touches live objects, so a stored run's report is rebuilt the same without a GPU.
"""
from __future__ import annotations

import os
from pathlib import Path

from opmatrix import paths
from opmatrix.decide import effort, stats
from opmatrix.decide import verdicts as verdict_rules
from opmatrix.manifest import RunManifest
from opmatrix.report.markdown import write_markdown
from opmatrix.store import COMPARISON, MANIFEST, REPORT_HTML, SKIPPED, VERDICTS_JSON, ResultStore, StoreError

SKIPPED_SHOWN = 20  # damaged lines listed in the terminal; skipped.txt has them all
# OPMATRIX_HTML=0: `run` and `report` write no report.html / comparison.html (each costs a matplotlib import and
# a second or two of charts); the Markdown, JSON and JUnit outputs are unchanged. The test suite sets it, except
# for the tests of the pages themselves. `opmatrix compare --html` and `history --html` write theirs regardless.
HTML_ENV = "OPMATRIX_HTML"


def html_pages() -> bool:
    return os.environ.get(HTML_ENV, "1") != "0"


def finish(store: ResultStore, console, strict: bool = False) -> Path:
    """Consolidate the store, write report.md and show the same tables; the one ending of `run` and `report`.
    Lines of results.jsonl that are not valid rows are skipped and listed (terminal and skipped.txt); strict:
    refuse with StoreError instead, before writing anything.
    Paths and the matrix name are printed escaped: a folder named `[x]` is data, not rich markup."""
    df = _consolidated(store, console, strict)
    manifest = store.manifest()
    if len(df) < manifest.reported_rows:
        raise StoreError(f"{store.run_dir}: its report was made from {manifest.reported_rows} rows and "
                         f"{store.jsonl.name} holds {len(df)} now: the report, verdicts.json and results.parquet are "
                         "left as they are (rows lost since; restore results.jsonl, or delete run.json's "
                         "reported_rows to report from what is left)")
    df, verdicts = decided(df, manifest)
    if verdicts is not None:
        (store.run_dir / VERDICTS_JSON).write_text(verdict_rules.to_json(verdicts), encoding="utf-8")
    path, page = _write_pages(df, manifest, store.run_dir, verdicts, console)
    write_comparisons(df, manifest, store.run_dir, console)
    if manifest.run_id and (store.run_dir / MANIFEST).is_file():
        manifest.reported_rows = len(df)
        store.write_manifest(manifest)
    _say_where(store, manifest, path, page, len(df), console)
    return store.run_dir


def _write_pages(df, manifest: RunManifest, folder: Path, verdicts, console) -> tuple[Path, Path | None]:
    """report.md, report.html (unless HTML_ENV says not to) and the same tables in the terminal: (md, html)."""
    from opmatrix.report.terminal import print_terminal

    path = write_markdown(df, manifest, folder / "report.md", verdicts)
    page = None
    if html_pages():
        from opmatrix.report.html.run_page import write_run_page

        page = write_run_page(df, manifest, folder / REPORT_HTML, verdicts)
    print_terminal(df, console, verdicts, full_text=shown_path(path))
    return path, page


def _say_where(store: ResultStore, manifest: RunManifest, path: Path, page: Path | None, rows: int, console) -> None:
    """Where the report's files are, and what is left to run when planned jobs have no row yet."""
    from rich.markup import escape

    console.print(f"results: {escape(str(store.run_dir / 'results.parquet'))}\nreport:  {escape(str(path))}\n"
                  f"page:    {escape(str(page)) if page else f'not written ({HTML_ENV}=0)'}", soft_wrap=True)
    left = manifest.planned_jobs - rows
    if left > 0:
        resume = f"opmatrix run {manifest.matrix or 'MATRIX'} --run-id {manifest.run_id} --resume"
        console.print(f"[yellow]{left} of {manifest.planned_jobs} planned jobs have no result yet "
                      f"({stopped_by(manifest)}): continue with `{escape(resume)}`[/]", soft_wrap=True)


def _consolidated(store: ResultStore, console, strict: bool):
    """The store read once (results.jsonl: its skipped lines said, or refused under strict) and consolidated from
    that reading; the rows as read are let go once the frame holds them."""
    loaded = store.load()
    skipped = loaded.skipped
    if skipped and strict:
        raise StoreError(f"{store.jsonl}: {len(skipped)} line(s) are not valid result rows, and --strict reports "
                         "only from an undamaged store:\n" + "\n".join(f"  {s}" for s in skipped[:SKIPPED_SHOWN])
                         + (f"\n  ... and {len(skipped) - SKIPPED_SHOWN} more" if len(skipped) > SKIPPED_SHOWN else ""))
    _note_skipped(store, skipped, console)
    return store.consolidate(loaded=loaded)


def write_comparisons(df, manifest: RunManifest, folder: Path, console) -> list:
    """A run of a matrix with [[compare]]: the upgrade verdicts (comparison.md / .json / .junit.xml / .html) and a
    summary."""
    from rich.markup import escape

    from opmatrix.report.html.compare_page import write_compare_page
    from opmatrix.upgrade import compare, cross_host

    min_speedup = manifest.acceptance.min_speedup
    comparisons = [compare.compare_paired(df, b, c, min_speedup, manifest.run_id, manifest)
                   for b, c in compare.declared_pairs(manifest.compare, df)]
    comparisons += cross_host.declared(df, manifest.compare_hosts, min_speedup, manifest.run_id, console)
    if not comparisons:
        return []
    (folder / f"{COMPARISON}.json").write_text(compare.to_json(comparisons), encoding="utf-8")
    (folder / f"{COMPARISON}.md").write_text(compare.markdown(comparisons), encoding="utf-8")
    (folder / f"{COMPARISON}.junit.xml").write_text(compare.junit_xml(comparisons), encoding="utf-8")
    if html_pages():
        write_compare_page(comparisons, folder / f"{COMPARISON}.html", f"opmatrix compare: run {manifest.run_id}")
    for c in comparisons:
        console.print(f"upgrade {escape(c.baseline)} -> {escape(c.candidate)}: {c.verdict} "
                      f"({', '.join(f'{n} {k}' for k, n in sorted(c.counts().items()))}); "
                      f"{escape(str(folder / (COMPARISON + '.md')))}", soft_wrap=True)
    return comparisons


def decided(df, manifest: RunManifest):
    """(rows with their paired statistics, verdicts) for a run timed in rounds; (rows, None) for one that was not."""
    if not verdict_rules.has_pairs(df):
        return df, None
    df = stats.add_paired_columns(df)
    if manifest.lines_of_code:
        loc = effort.from_record(manifest.lines_of_code)
    else:  # a run stored before run.json recorded them: today's sources
        loc = effort.table(Path(manifest.kernels_dir or paths.BUILTIN_KERNELS), set(zip(df.kernel, df.backend)))
    return df, verdict_rules.decide(df, manifest.acceptance, loc)


def stopped_by(manifest: RunManifest) -> str:
    """Why a run has jobs without a result: the signal that interrupted its last session, its deadline, or
    neither."""
    if manifest.interrupted:
        return f"interrupted by {manifest.interrupted}"
    if manifest.sessions and manifest.sessions[-1].deadline_s is not None:
        return "stopped at the deadline"
    return "no deadline was set: their rows never came or were lost"


def _note_skipped(store: ResultStore, skipped: list[str], console) -> None:
    """Say how many lines of results.jsonl the report leaves out and why, in the terminal and in skipped.txt beside
    report.md (removed once the store reads clean, so it never outlives the damage it describes)."""
    from rich.markup import escape

    listing = store.run_dir / SKIPPED
    if not skipped:
        listing.unlink(missing_ok=True)
        return
    listing.write_text("".join(f"{line}\n" for line in skipped), encoding="utf-8")
    console.print(f"[yellow]{len(skipped)} line(s) of {escape(str(store.jsonl))} skipped: not valid result rows "
                  f"(all listed in {escape(str(listing))}); the report is built from the other rows[/]", soft_wrap=True)
    for line in skipped[:SKIPPED_SHOWN]:
        console.print(f"  {escape(line)}", highlight=False, soft_wrap=True)
    if len(skipped) > SKIPPED_SHOWN:
        console.print(f"  ... and {len(skipped) - SKIPPED_SHOWN} more", highlight=False)


def shown_path(path: Path) -> str:
    """A file of the run as a message names it: from the working folder when it lies below it
    (reports/<run>/report.md), else in full."""
    path = Path(path).absolute()
    cwd = Path.cwd()
    return str(path.relative_to(cwd)) if path.is_relative_to(cwd) else str(path)
