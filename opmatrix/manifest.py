"""run.json: what a run folder holds besides its rows. Which matrix, when, on what scheduler, how many jobs were
planned, and one entry per session (`--resume` adds one), including whether it was interrupted. Read and written
only through `RunManifest`."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from opmatrix.core.acceptance import Acceptance


@dataclass
class Session:
    started_at: str
    jobs: int
    deadline_s: float | None = None
    finished_at: str = ""
    cells_wall_s: float | None = None  # scheduler start-up excluded
    interrupted: str = ""  # the signal that stopped it (SIGINT, SIGTERM); "" when it ran to its end
    # "kernel/backend" implementations whose sources differ from the previous session's (a --resume after an edit):
    # rows of this session ran other code than the earlier sessions' rows of the same implementation
    sources_changed: list[str] = field(default_factory=list)


@dataclass
class RunManifest:
    run_id: str
    matrix: str = ""
    description: str = ""  # the matrix's own description (free text), shown under the report's title
    devices: dict[str, str] = field(default_factory=dict)  # device id -> its [[device]] description, where it has one
    started_at: str = ""
    finished_at: str = ""
    driver_host: str = ""
    scheduler: str = ""
    cells: dict[str, int] = field(default_factory=dict)
    planned_jobs: int = 0
    baseline: str = ""  # acceptance.baseline, written for readers of older run.json; read acceptance instead
    acceptance: Acceptance = field(default_factory=Acceptance)  # the matrix's [acceptance]: a JSON object in run.json
    kernels_dir: str = ""  # where the kernels' implementation files were
    # "kernel/backend" -> lines of code of its implementation files when the run started (the verdicts' effort), so
    # that a stored run's report never depends on today's sources
    lines_of_code: dict[str, int] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # "kernel/backend" -> digest of its sources, last session
    compare: list[list[str]] = field(default_factory=list)  # the matrix's [[compare]]: [baseline, candidate] toolchains
    compare_hosts: list[dict[str, str]] = field(default_factory=list)  # the matrix's [[compare_hosts]] (devices)
    sessions: list[Session] = field(default_factory=list)
    cells_wall_s: float = 0.0
    reported_rows: int = 0  # the rows report.md and verdicts.json were last made from: a report never replaces them
    # with fewer (opmatrix.report.build.finish)

    def ran_other_code(self, implementation: str, started_a: str, started_b: str) -> bool:
        """Did two rows of one implementation ("kernel/backend"), started at these times, run different sources:
        was it edited in a session after the earlier row's session, up to the later row's?"""
        def session_of(started: str) -> int:
            return max((i for i, s in enumerate(self.sessions) if s.started_at <= started), default=0)

        first, last = sorted((session_of(started_a), session_of(started_b)))
        return any(implementation in s.sources_changed for s in self.sessions[first + 1:last + 1])

    @property
    def interrupted(self) -> str:
        """The signal that stopped the latest session, if one did."""
        return self.sessions[-1].interrupted if self.sessions else ""

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunManifest:
        data = json.loads(text)
        known = {f.name for f in dataclasses.fields(cls)}
        session_fields = {f.name for f in dataclasses.fields(Session)}
        sessions = [Session(**{k: v for k, v in s.items() if k in session_fields}) for s in data.get("sessions", [])]
        return cls(**{k: v for k, v in data.items() if k in known and k not in ("sessions", "acceptance")},
                   sessions=sessions, acceptance=Acceptance.from_json(data.get("acceptance")))
