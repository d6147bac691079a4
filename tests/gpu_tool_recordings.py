"""What Nsight Compute and compute-sanitizer printed on an H100 (tests/data/gpu_tools_h100/, recorded by
lab/capture_profiler_outputs.sh), for the tests of issue 47's parsers and tools (test_gpu_tool_output.py,
test_gpu_tools.py, in tests/unit)."""
from __future__ import annotations

from tests import helpers

DATA = helpers.DATA / "gpu_tools_h100"


def recorded(name: str) -> tuple[str, int]:
    """A recorded output and the exit code the capture script appended to it (its last line, `rc=N`)."""
    text = (DATA / name).read_text()
    body, _, code = text.rstrip("\n").rpartition("\nrc=")
    return body + "\n", int(code)
