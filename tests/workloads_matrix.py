"""Helper of the tests of workloads a matrix defines by their parameters (test_workloads_from.py, in tests/unit and
tests/cells): a CPU matrix of rmsnorm whose top, workloads and tail are filled in, and a workloads file beside it as
`opmatrix profile --run-id prof` would leave it (prof/workloads.toml)."""
from __future__ import annotations

import textwrap
from pathlib import Path

MATRIX = """
name = "shapes"
backends = ["torch"]
{top}
[run]
timeout_s = 120
rep_ms = 5
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
[[toolchain]]
name = "host"
system = true
[[kernel]]
name = "rmsnorm"
workloads = {{ cpu = {rmsnorm} }}
dtypes = {{ cpu = ["float32"] }}
{rest}
"""
FRAGMENT = """
[workload.rmsnorm.prof]
tokens = 64
hidden = 64

[workload.rope.prof]
batch = 2
heads = 4
kv_heads = 4
seq = 32
head_dim = 16
"""


def write(root: Path, fragment: str = FRAGMENT, top: str = 'workloads_from = "prof/workloads.toml"',
          rmsnorm: str = '["prof"]', rest: str = "") -> Path:
    """root/m.toml including root/prof/workloads.toml (as `opmatrix profile --run-id prof` would leave it)."""
    (root / "prof").mkdir(parents=True, exist_ok=True)
    (root / "prof" / "workloads.toml").write_text(textwrap.dedent(fragment))
    path = root / "m.toml"
    path.write_text(MATRIX.format(top=top, rmsnorm=rmsnorm, rest=rest))
    return path
