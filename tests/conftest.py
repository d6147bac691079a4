"""Fixtures shared by the test modules. Helpers (probe kernels, plugin folders, worker runs) are in tests/helpers.py."""
import textwrap
from pathlib import Path

import pytest


@pytest.fixture
def write_matrix(tmp_path):
    """Write a matrix file into tmp_path from TOML text; returns its path."""

    def write(text: str, name: str = "m.toml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write
