"""One environment variable set for the duration of a `with` block, then put back as it was (removed if it was
unset): for the compilers that read their switches and folders from the environment. Stdlib only."""
from __future__ import annotations

import contextlib
import os
from typing import Iterator


@contextlib.contextmanager
def variable(name: str, value: str) -> Iterator[None]:
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before
