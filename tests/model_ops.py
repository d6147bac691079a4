"""Helpers of the Llama decoder's memory-bound ops tests (tests/cells: test_kernels_model_ops.py on the CPU,
test_kernels_model_ops_h200.py for an H200 no host has): the three kernels' matrix, run for real on this host."""
import pandas as pd

from opmatrix.run import run
from opmatrix.scheduling.local import LocalScheduler
from tests.helpers import CPU_DEVICE, DEFAULT_STYLE_DEVICES

# One CPU-sized workload each (the ragged ones: sizes no block divides, so the masks are exercised)
KERNELS = {"rope": "ragged_d96", "swiglu": "ragged_689", "add_rmsnorm": "ragged_700"}

CPU, H200 = CPU_DEVICE, DEFAULT_STYLE_DEVICES["h200"]
MATRIX = """
name = "model-ops"
backends = ["torch", "torch-compile", "tilelang", "triton"]
[run]
timeout_s = 300
rep_ms = 20
max_rounds = 10
{devices}[[toolchain]]
name = "host"
system = true
"""
KERNEL = """
[[kernel]]
name = "{name}"
workloads = {{ cpu = ["{workload}"], nvidia = ["llama_decode"] }}
dtypes = {{ cpu = ["float32"], nvidia = ["bfloat16"] }}
"""


def run_model_ops(root, devices: str):
    """The three kernels on the named devices (CPU and/or H200 text above); (run folder, rows by (kernel, device,
    backend))."""
    matrix = root / "model-ops.toml"
    matrix.write_text(MATRIX.format(devices=devices)
                      + "".join(KERNEL.format(name=k, workload=w) for k, w in KERNELS.items()))
    run_dir = run(matrix, reports_dir=root / "reports", run_id="model-ops", scratch_root=root / "scratch",
                  scheduler=LocalScheduler())
    df = pd.read_parquet(run_dir / "results.parquet")
    return run_dir, {(r.kernel, r.device, r.backend): r for r in df.itertuples()}
