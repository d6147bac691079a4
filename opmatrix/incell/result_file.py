"""The file a worker hands its result to the cell runner through: written by the worker (atomically), read by the
runner only when it is whole and of the attempt the runner just started, so a resumed or retried job never takes
the numbers of an earlier attempt. One module for both sides, below both."""
from __future__ import annotations

import json
from pathlib import Path

from opmatrix.core.result import Result


def read_result(path: Path, attempt: str) -> Result | None:
    """The worker's result, only if it is this attempt's (and whole)."""
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or data.get("attempt") != attempt:
            return None
        return Result.from_dict(data.get("result"), identified=False)
    except (OSError, ValueError):  # absent, cut short, or not a valid row (RowError is a ValueError)
        return None


def write_result(path: Path, attempt: str, result: Result) -> None:
    """Atomic: the cell runner sees the whole file or none."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"attempt": attempt, "result": json.loads(result.to_json())}))
    tmp.replace(path)
