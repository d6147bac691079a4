"""Helper of issue 47's CPU-cell tests (test_gpu_tools_run.py, in tests/unit and tests/cells): a matrix of one CPU
device over the planted kernel of the GPU-tool tests (tests/gpu_tools/kernels/doubled: torch, Triton's default and
its planted past_end), its [run] table open for the profile / sanitize keys."""
from __future__ import annotations

import textwrap
from pathlib import Path

from tests.helpers import GPU_TOOL_KERNELS


MATRIX = """
name = "gpu-tools-cpu"
backends = ["torch", "triton"]
[run]
timeout_s = 120
warmup_ms = 0
rep_ms = 5
rounds = 10
max_rounds = 10
burst_ms = 2
burst_warmup_ms = 0
compile_only = false
kernels_dir = "{kernels}"
{extra}
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
[[toolchain]]
name = "host"
system = true
[[kernel]]
name = "doubled"
workloads = {{ cpu = ["small"] }}
dtypes = {{ cpu = ["float32"] }}
"""


def planted_matrix(root: Path, extra: str = "") -> Path:
    """root/m.toml: MATRIX with `extra` lines in its [run] table."""
    path = root / "m.toml"
    path.write_text(textwrap.dedent(MATRIX).format(kernels=GPU_TOOL_KERNELS, extra=extra))
    return path
