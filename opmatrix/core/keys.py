"""The one key of a job and of its result row. Stdlib only."""
from __future__ import annotations

import hashlib
import json
import re
from typing import NamedTuple

class JobKey(NamedTuple):
    """The identity of a job and of its result row: one per (cell, kernel, workload, dtype, backend, variant)."""

    cell: str
    kernel: str
    workload: str
    dtype: str
    backend: str
    variant: str

    def label(self) -> str:
        """How a message names the job: "cpu.host probe quick float32 torch[llama]"."""
        backend = self.backend if self.variant == "default" else f"{self.backend}[{self.variant}]"
        return f"{self.cell} {self.kernel} {self.workload} {self.dtype} {backend}"

    def folder_name(self) -> str:
        """A scratch folder name unique to this key: readable, and safe for any name a matrix allows."""
        readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", "-".join(self[1:]))[:80]
        return f"{readable}-{hashlib.sha256(json.dumps(list(self)).encode()).hexdigest()[:10]}"


KEY_FIELDS = JobKey._fields
