"""Progress of a run: one rich progress bar per device (jobs done of jobs planned) with what its running cells
are on, and an overall bar when the run spans several devices.

In a terminal it is live (rich.progress); otherwise (CI, logs) one line per cell start and per result as it
lands. Cell ids, hosts, backend labels and error texts are data, never markup: `tilelang[tuned]` keeps its
variant and an error naming `[/usr/include/x.h]` cannot crash the run's output, and a control character in them
(an escape sequence that would clear the screen or retitle the terminal) is written out, in the live bars too
(opmatrix.core.text.visible). Status colours come from the one table in opmatrix.report.styles, so the live view
and the report agree. `no_host` rows (a device no host of the run has; a default matrix plans hundreds) are counted
and said in one line per device when the run ends, in either mode.
"""
from __future__ import annotations

from dataclasses import dataclass

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from opmatrix.core import status
from opmatrix.core.result import Result, backend_label
from opmatrix.core.text import shorten, visible
from opmatrix.report.styles import plain, status_style

ERROR_CHARS = 160  # the first line of an error, as far as the log line shows it (cut at a word, with "...")


@dataclass
class _Cell:
    """What the view knows of one cell: its device's bar, where it runs and the job it is on."""
    device: str
    state: str = "pending"  # pending, running, done
    where: str = ""
    job: str = ""


class ProgressView:
    def __init__(self, plans: list, console, full_text: str = "") -> None:
        self.console = console
        self.full_text = full_text  # where a shortened error's whole first line will be (the run's report.md)
        self.cells = {p.cell.id: _Cell(p.cell.device.id) for p in plans}
        jobs: dict[str, int] = {}
        for p in plans:
            jobs[p.cell.device.id] = jobs.get(p.cell.device.id, 0) + len(p.all_jobs())
        self.total = sum(jobs.values())
        self.done = 0
        self.hostless: dict[str, int] = {}  # device -> its `no_host` rows: one log line per device, not per row
        self.live = console.is_terminal
        self.bars = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), TextColumn("{task.fields[now]}", markup=False),
                             console=console, auto_refresh=self.live)
        self.tasks = {device: self.bars.add_task(device, total=n, now="") for device, n in sorted(jobs.items())}
        self.overall = self.bars.add_task("all", total=self.total, now="") if len(jobs) > 1 else None

    def __enter__(self) -> ProgressView:
        if self.live:
            self.bars.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.live:
            self.bars.stop()
        for device, n in sorted(self.hostless.items()):
            self.note(f"{device}: {n} job(s) no_host (no host of this run has it; each is a stored row)")

    def started(self, cell: str, where: str) -> None:
        state = self._cell(cell)
        state.state, state.where = "running", visible(where)
        self._show(state.device)
        self._log(f"{plain(cell)}: started on {plain(where)}")

    def finished(self, cell: str) -> None:
        state = self._cell(cell)
        state.state, state.job = "done", ""
        self._show(state.device)

    def working(self, cell: str, text: str) -> None:
        """What a running cell is doing between two results (a group's builds, its rounds so far)."""
        state = self._cell(cell)
        state.job = visible(text)
        self._show(state.device)
        self._log(f"{plain(cell)}: {plain(text)}")

    def note(self, line: str) -> None:
        """A line from the scheduler (a resubmission, a lost node): shown in either mode, as plain text."""
        self.console.print(plain(line), highlight=False, soft_wrap=True)

    def result(self, r: Result) -> None:
        self.done += 1
        label = visible(f"{r.kernel} {r.workload} {r.dtype} {backend_label(r.backend, r.variant)}")
        state = self._cell(r.cell, r.device)
        state.job = label
        self.bars.advance(self.tasks[state.device])
        if self.overall is not None:
            self.bars.advance(self.overall)
        self._show(state.device)
        if r.status == status.NO_HOST:  # a default matrix plans hundreds: counted, said once per device at the end
            self.hostless[state.device] = self.hostless.get(state.device, 0) + 1
            return
        self._log(self._result_line(r, label))

    def _result_line(self, r: Result, label: str) -> str:
        speed = f" {r.median_ms:.4g} ms" if r.median_ms is not None else ""
        error = (r.error or "").strip().splitlines()
        why = f": {plain(shorten(error[0], ERROR_CHARS, self.full_text))}" if error and r.status != status.OK else ""
        style = status_style(r.status)
        shown = f"[{style}]{plain(r.status)}[/]" if style else plain(r.status)
        return f"{plain(f'[{self.done:>4}/{self.total}]')} {plain(r.cell)} {plain(label)} -> {shown}{speed}{why}"

    def _cell(self, cell: str, device: str = "?") -> _Cell:
        """A cell's record; a cell the plans did not name (it should not happen) gets one rather than a KeyError
        in the middle of a run."""
        if cell not in self.cells:
            self.cells[cell] = _Cell(visible(device))
            if device not in self.tasks:
                self.tasks[device] = self.bars.add_task(device, total=None, now="")
        return self.cells[cell]

    def _show(self, device: str) -> None:
        """The device bar's text: each running cell, where it runs and the job it is on."""
        running = [f"{visible(c)} @ {s.where or '?'}: {s.job or 'building env'}" for c, s in self.cells.items()
                   if s.device == device and s.state == "running"]
        self.bars.update(self.tasks[device], now="; ".join(running))

    def _log(self, markup: str) -> None:
        """Outside a terminal, one line per event (the bars are not drawn there)."""
        if not self.live:
            self.console.print(markup, highlight=False, soft_wrap=True)
