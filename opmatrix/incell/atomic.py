"""A file written whole or not at all, by any number of processes at once: each stages its text beside the target
(a name of its own process's) and renames it over the target, so a reader sees one writer's whole file, never a
mix. Stdlib only."""
from __future__ import annotations

import os
from pathlib import Path


def write_text(path: Path, text: str) -> None:
    staged = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    staged.write_text(text)
    os.replace(staged, path)
