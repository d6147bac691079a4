"""Progress of a run: per device, cells done / running / pending and the job each running cell is on.

In a terminal it is a live table (rich); otherwise (CI, logs) one line per result as it lands.
"""
from __future__ import annotations

from collections import defaultdict

from rich.live import Live
from rich.table import Table

from opmatrix.core.result import Result, backend_label

COLOURS = {"ok": "green", "no_host": "dim", "unsupported": "yellow", "not_installed": "yellow"}


class ProgressView:
    def __init__(self, plans: list[dict], console) -> None:
        self.console = console
        self.total = sum(len(p.jobs) for p in plans)
        self.done = 0
        self.cells = {p.cell.id: p.cell.device.id for p in plans}
        self.state = {cell: "pending" for cell in self.cells}
        self.current: dict[str, str] = {}
        self.where: dict[str, str] = {}
        self.live = Live(self._table(), console=console, refresh_per_second=4) if console.is_terminal else None

    def __enter__(self) -> ProgressView:
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.live:
            self.live.__exit__(*exc)

    def started(self, cell: str, where: str) -> None:
        self.state[cell], self.where[cell] = "running", where
        self._refresh(f"{cell}: started on {where}")

    def finished(self, cell: str) -> None:
        self.state[cell] = "done"
        self.current.pop(cell, None)
        self._refresh(None)

    def note(self, line: str) -> None:
        self.console.print(line, highlight=False)

    def result(self, r: Result) -> None:
        self.done += 1
        label = f"{r.kernel} {r.workload} {r.dtype} {backend_label(r.backend, r.variant)}"
        self.current[r.cell] = label
        speed = f" {r.median_ms:.4g} ms" if r.median_ms is not None else ""
        colour = COLOURS.get(r.status, "red")
        self._refresh(f"[{self.done:>4}/{self.total}] {r.cell} {label} -> [{colour}]{r.status}[/]{speed}")

    def _refresh(self, line: str | None) -> None:
        if self.live:
            self.live.update(self._table())
        elif line:
            self.console.print(line, highlight=False)

    def _table(self) -> Table:
        table = Table(title=f"opmatrix: {self.done}/{self.total} jobs")
        for col in ("device", "done", "running", "pending", "now"):
            table.add_column(col)
        by_device: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for cell, device in self.cells.items():
            by_device[device][self.state[cell]].append(cell)
        for device, states in sorted(by_device.items()):
            now = "; ".join(f"{c} @ {self.where.get(c, '?')}: {self.current.get(c, 'building env')}"
                            for c in states["running"])
            table.add_row(device, str(len(states["done"])), str(len(states["running"])),
                          str(len(states["pending"])), now)
        return table
