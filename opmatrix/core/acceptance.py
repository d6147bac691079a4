"""A run's acceptance criteria, the [acceptance] table of its matrix file, as one typed record from the matrix to the
report: the matrix validates the table (opmatrix.matrix.Acceptance, whose `record()` makes this), run.json stores it
as a JSON object, and the verdicts, the comparisons and the report read its fields. `Acceptance.from_json` is the
one place a stored object is read back; the defaults are written here and nowhere else. Stdlib only."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

DEFAULT_BASELINE = "torch"  # [acceptance] baseline: the framework path
DEFAULT_MIN_SPEEDUP = 1.05  # [acceptance] min_speedup: the gain a contestant must show


@dataclass(frozen=True)
class Acceptance:
    """What a contestant must show to be adopted: beat `baseline` (timed in every round, beside its A/A twin) by
    `min_speedup` or the noise floor, whichever is higher, with its error under `max_rel_err` where one is set."""

    baseline: str = DEFAULT_BASELINE
    min_speedup: float = DEFAULT_MIN_SPEEDUP
    max_rel_err: float | None = None  # a ceiling on ||out - ref|| / ||ref|| beyond each kernel's own tolerance

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Acceptance:
        """run.json's `acceptance` object: a key it lacks (a run stored before the key existed, or an empty object)
        takes its default; a key this version does not know is ignored."""
        known = {f.name for f in dataclasses.fields(cls)}
        given = {k: v for k, v in (data or {}).items() if k in known and v is not None}
        record = cls(**given)
        return dataclasses.replace(record, baseline=record.baseline or DEFAULT_BASELINE,
                                   min_speedup=float(record.min_speedup),
                                   max_rel_err=None if record.max_rel_err is None else float(record.max_rel_err))
