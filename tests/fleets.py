"""Helpers of the fleet tests (test_fleet_compare.py and test_fleet_hosts.py, in tests/unit and tests/cells): a
matrix of two H200 devices told apart by their driver and runtime ranges (canary and stable) beside a CPU, and one
simulated night of rows across three hosts (the baseline device on host a, a second baseline host b for the host
A/A, the canary on host c), each with its own clock state, drift per round, worker offsets and burst noise."""
import numpy as np

from opmatrix.core.result import Result
from opmatrix.store import frame


ROUNDS, DRIFT, NOISE, PROCESS, CLOCK = 20, 0.02, 0.01, 0.005, 0.03
HOSTS = {"h200-stable": ("gpu-a", "580.95.05"), "h200-stable-b": ("gpu-b", "580.95.05"),
         "h200-canary": ("gpu-c", "590.48.01")}


def host_rows(rng, device: str, host_factor: float, slowdown: float = 1.0) -> list[Result]:
    """One device's rows as its host times them: torch (the framework baseline), its A/A twin, and triton."""
    host, driver = HOSTS[device]
    clock = np.exp(rng.normal(0, CLOCK))
    rows = []
    for w in ("w1", "w2"):
        drift = clock * np.exp(rng.normal(0, DRIFT, ROUNDS))
        burst = lambda: drift * np.exp(rng.normal(0, PROCESS) + rng.normal(0, NOISE, ROUNDS))  # noqa: E731
        base, twin = list(burst()), list(burst())
        for backend in ("torch", "triton"):
            series = base if backend == "torch" else list(0.8 * host_factor * slowdown * burst())
            rows.append(Result(
                run_id="fleet", cell=f"{device}.host", device=device, toolchain="host", kernel="k", workload=w,
                dtype="float16", backend=backend, variant="default", status="ok", pairing="interleaved",
                rel_err=1e-4, tolerance=1e-2, compile_s=2.0, rounds=ROUNDS, round_ms=series,
                median_ms=float(np.median(series)), baseline_round_ms=[] if backend == "torch" else base,
                aa_round_ms=twin, torch="2.11.0", triton="3.6.0", host=host, driver=driver, runtime="cuda 13.0"))
    return rows


def fleet_run(seed: int, slowdown: float, host_b: float = 1.0):
    """One night: the two baseline hosts (b's contestant `host_b` off a's) and the canary (`slowdown` its driver's)."""
    rng = np.random.default_rng(seed)
    return frame(host_rows(rng, "h200-stable", 1.0) + host_rows(rng, "h200-stable-b", host_b)
                 + host_rows(rng, "h200-canary", 1.0, slowdown))


# the fleet matrix of test_fleet_hosts.py
FLEET = """
name = "fleet"
backends = ["torch"]
[[device]]
id = "h200-stable"
vendor = "nvidia"
arch = "sm_90"
name = "H200"
driver = "<590"
[[device]]
id = "h200-canary"
vendor = "nvidia"
arch = "sm_90"
name = "H200"
driver = ">=590,<600"
runtime = "13.*"
[[device]]
id = "cpu"
vendor = "cpu"
arch = "x86_64"
[[toolchain]]
name = "host"
system = true
[[kernel]]
name = "gemm_relu"
workloads = { nvidia = ["square_4096"], cpu = ["square_512"] }
dtypes = { nvidia = ["float16"], cpu = ["float32"] }
"""
