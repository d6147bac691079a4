"""What the intervals cover on this CPU (opmatrix.decide.calibration), measured rather than simulated: torch against
its A/A twin and an identical contestant through the real interleaved rounds of the cell runner, over many small
paired groups (opt in: OPMATRIX_CPU_CALIBRATION=1). The same on synthetic runs of known truth, and the calibration
command: tests/unit/test_calibration.py."""
import os
import textwrap

import pytest

from opmatrix import plan as plan_mod
from opmatrix.decide import calibration
from opmatrix.store import frame


CPU_GROUPS = 32
SPEC = textwrap.dedent(f'''
    WORKLOADS = {{f"w{{i:02d}}": {{"n": 65536}} for i in range({CPU_GROUPS})}}

    def describe(w): return f"n={{w['n']}}"
    def flops(w): return float(w["n"])
    def min_bytes(w, dtype): return 8.0 * w["n"]
    def tolerance(dtype): return 1e-6

    def make_inputs(w, dtype, device, seed):
        import torch
        g = torch.Generator().manual_seed(seed)
        return (torch.randn(w["n"], generator=g, dtype=getattr(torch, dtype)),)

    def make_output(w, dtype, device):
        import torch
        return torch.empty(w["n"], dtype=getattr(torch, dtype))

    def reference(inputs, w):
        return inputs[0].double() * 2
''')
TORCH = "def build(w, dtype, device, variant):\n    def fn(x, out):\n        out.copy_(x * 2)\n    return fn\n"


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("OPMATRIX_CPU_CALIBRATION"), reason="set OPMATRIX_CPU_CALIBRATION=1: "
                    "CPU_GROUPS real paired runs take minutes on a shared machine (255 s on the team's loaded 2-core "
                    "machine), past the suite's budget")
def test_torch_against_its_twin_on_this_cpu_through_the_real_rounds(tmp_path):
    """CPU_GROUPS (kernel, workload) groups, each a small paired run: torch, its A/A twin (a worker of its own) and
    an identical contestant, timed in the cell runner's real interleaved rounds. Prints what the intervals cover."""
    from opmatrix.incell.cell_runner import run_cell
    from opmatrix.matrix import load_matrix
    from tests.helpers import plugin_root

    plugin_root(tmp_path, {"torch": TORCH, "same": TORCH}, kernel="axpy", spec=SPEC)
    (tmp_path / "m.toml").write_text(textwrap.dedent(f"""
        name = "aa-cpu"
        backends = ["torch", "same"]
        [run]
        timeout_s = 120
        rep_ms = 5
        warmup_ms = 2
        burst_ms = 3
        burst_warmup_ms = 1
        rounds = 10
        max_rounds = 10
        kernels_dir = "kernels"
        backends_dir = "backends"
        [[device]]
        id = "cpu"
        vendor = "cpu"
        arch = "auto"
        [[toolchain]]
        name = "host"
        system = true
        [[kernel]]
        name = "axpy"
        workloads = {{ cpu = {sorted(f"w{i:02d}" for i in range(CPU_GROUPS))!r} }}
        dtypes = {{ cpu = ["float32"] }}
        """).replace("'", '"'))
    (plan,) = plan_mod.cell_plans(load_matrix(tmp_path / "m.toml"), "aa-cpu", tmp_path / "scratch")
    df = frame(list(run_cell(plan)))
    twins = calibration.twins(df)
    same = calibration.speedups(df)
    within = calibration.speedups(df, between_processes=False)
    covered = sum(lo <= 1 <= hi for _, lo, hi in same.values())
    covered_within = sum(lo <= 1 <= hi for _, lo, hi in within.values())
    print(f"\nCPU, {len(twins)} paired groups of torch and its twin (10 rounds each): A/A "
          f"intervals containing 1.0 {calibration.percent(*calibration.Calibration([], twins).coverage())} "
          f"(leave-one-out {calibration.percent(*calibration.Calibration([], twins).coverage('out'))}, within the "
          f"rounds only {calibration.percent(*calibration.Calibration([], twins).coverage('within'))}); the "
          f"identical contestant's speed-up interval containing 1.0: {covered}/{len(same)} "
          f"(within the rounds only {covered_within}/{len(within)})")
    assert len(twins) >= 30 and all(t.rounds >= 10 for t in twins)
    assert len(same) >= 30 and covered >= covered_within
