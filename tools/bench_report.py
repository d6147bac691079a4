"""How long `opmatrix report` takes, and how much memory, on a synthetic run of N rows (issue 29, item 8).

    python tools/bench_report.py --rows 200000            # wall time and peak RSS of `opmatrix report`
    python tools/bench_report.py --rows 20000 --profile   # and the top of a cProfile of it

The run is written into a temporary folder (removed afterwards unless --keep) and never committed. Its shape, a
large nightly sweep: 2 toolchains x 4 devices (2 with a host, 2 without: their rows are `no_host`) x 8 kernels x 5
backends (torch the baseline; triton, tilelang, tilelang[tuned], cutlass) x 3 dtypes, and as many workloads per
kernel as N needs. On a device with a host every job was timed in interleaved rounds (--rounds, the baseline's A/A
twin in every round) and keeps --samples raw samples; one row in 40 failed to compile, one in 25 is unsupported.
Numbers are drawn from a seeded generator, so the same arguments write the same run.

It prints the machine, the command, the rows, the size of results.jsonl, the wall time and the peak resident memory
of the `opmatrix report` process (os.wait4's ru_maxrss). Figures go in docs/results.md, never in this file.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from opmatrix.core.result import Result  # noqa: E402
from opmatrix.manifest import RunManifest  # noqa: E402

TOOLCHAINS = ["a", "b"]
DEVICES = {"h200": True, "cpu": True, "mi300x": False, "b200": False}  # id -> a host of the run has it
KERNELS = [f"kernel{i}" for i in range(8)]
BACKENDS = [("torch", "default"), ("triton", "default"), ("tilelang", "default"), ("tilelang", "tuned"),
            ("cutlass", "default")]
DTYPES = ["float16", "bfloat16", "float32"]
RUN_ID = "bench-report"


def jobs_per_workload() -> int:
    return len(TOOLCHAINS) * len(DEVICES) * len(KERNELS) * len(BACKENDS) * len(DTYPES)


def rows(n: int, rounds: int, samples: int, seed: int = 0):
    """The run's rows as JSON lines (Result.to_json, the store's own serialiser), at most n of them."""
    rng = random.Random(seed)
    workloads = -(-n // jobs_per_workload())
    written = 0
    for w in range(workloads):
        for toolchain in TOOLCHAINS:
            for device, hosted in DEVICES.items():
                for kernel in KERNELS:
                    for dtype in DTYPES:
                        group = f"{device}.{toolchain}/{kernel}/w{w}/{dtype}"
                        base_ms = rng.uniform(0.01, 5.0)
                        base_rounds = [base_ms * rng.gauss(1, 0.01) for _ in range(rounds)]
                        aa_rounds = [base_ms * rng.gauss(1, 0.01) for _ in range(rounds)]
                        for backend, variant in BACKENDS:
                            if written == n:
                                return
                            written += 1
                            yield _row(rng, toolchain, device, hosted, kernel, f"w{w}", dtype, backend, variant,
                                       group, base_ms, base_rounds, aa_rounds, samples).to_json()


def _row(rng, toolchain, device, hosted, kernel, workload, dtype, backend, variant, group, base_ms, base_rounds,
         aa_rounds, samples) -> Result:
    r = Result(run_id=RUN_ID, cell=f"{device}.{toolchain}", device=device, toolchain=toolchain, kernel=kernel,
               workload=workload, dtype=dtype, backend=backend, variant=variant, shape=f"n={workload}",
               flops=2e9, min_bytes=6e6, host="bench", python="3.12", torch="2.11.0", triton="3.6.0",
               tilelang="0.1.15", env_hash=f"{device}{toolchain}", started_at="2026-12-02T00:00:00+00:00")
    if not hosted:
        r.status, r.phase, r.error = "no_host", "", f"no host of this run has a {device}"
        return r
    draw = rng.random()
    if backend != "torch" and draw < 0.025:
        r.status, r.phase, r.error = "compile_error", "build", f"RuntimeError: no viable overload ({group})\n  at x"
        return r
    if backend != "torch" and draw < 0.065:
        r.status, r.phase, r.error = "unsupported", "load", f"{backend} does not cover {dtype} on {device}"
        return r
    ratio = 1.0 if backend == "torch" else rng.uniform(0.5, 2.0)
    mine = [b / ratio * rng.gauss(1, 0.01) for b in base_rounds]
    median = sorted(mine)[len(mine) // 2]
    r.status, r.phase, r.trials, r.rel_err, r.tolerance = "ok", "done", 3, 1e-4, 2e-3
    r.compile_s, r.compile_cache, r.config = rng.uniform(0.1, 20), "cold", "{}"
    r.timer, r.pairing, r.rounds, r.round_group = "cuda-events", "interleaved", len(mine), group
    r.median_ms, r.p10_ms, r.p90_ms = median, median * 0.98, median * 1.02
    r.samples_ms = [median * rng.gauss(1, 0.02) for _ in range(samples)]
    r.reps = samples
    r.round_ms, r.aa_round_ms = mine, list(aa_rounds)
    r.baseline_round_ms = [] if backend == "torch" else list(base_rounds)
    r.round_position = list(range(len(mine)))
    r.tflops, r.gbps = 2e9 / (median * 1e-3) / 1e12, 6e6 / (median * 1e-3) / 1e9
    r.ceiling_tflops, r.ceiling_gbps = 700.0, 4000.0
    r.roofline_pct = 100 * r.tflops / 700.0
    r.stability_pct, r.clock_dropped = rng.uniform(0, 3), False
    return r


def write_run(folder: Path, n: int, rounds: int, samples: int) -> int:
    folder.mkdir(parents=True)
    with open(folder / "results.jsonl", "w", encoding="utf-8") as fh:
        for line in rows(n, rounds, samples):
            fh.write(line + "\n")
    manifest = RunManifest(run_id=RUN_ID, matrix="bench", planned_jobs=n, baseline="torch",
                           acceptance={"baseline": "torch", "min_speedup": 1.05},
                           lines_of_code={f"{k}/{b}": 50 for k in KERNELS for b, _ in BACKENDS},
                           compare=[list(TOOLCHAINS)])
    (folder / "run.json").write_text(manifest.to_json(), encoding="utf-8")
    return (folder / "results.jsonl").stat().st_size


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    return f"{os.cpu_count()} cores ({cpu}), load average {load}, Python {platform.python_version()}"


def report(folder: Path, profile: Path | None) -> tuple[int, float, float, float, str]:
    """(exit code, wall s, CPU s, peak RSS MB, output tail) of `opmatrix report folder` in its own process. CPU
    time (user + system) says what the work costs where other processes share the cores; wall time what a user
    waits."""
    cmd = [sys.executable, *(["-m", "cProfile", "-o", str(profile)] if profile else []), "-m", "opmatrix", "report",
           str(folder)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               OPMATRIX_HTML="1", COLUMNS="200")
    log = folder.parent / "report.log"
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, log.read_text()[-1500:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=30, help="rounds per timed row (default 30)")
    parser.add_argument("--samples", type=int, default=100, help="raw samples kept per timed row (default 100)")
    parser.add_argument("--profile", action="store_true", help="also print the top of a cProfile of the report")
    parser.add_argument("--keep", action="store_true", help="keep the temporary run folder (its path is printed)")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="opmatrix-bench-report-"))
    try:
        folder = tmp / "reports" / RUN_ID
        start = time.perf_counter()
        size = write_run(folder, args.rows, args.rounds, args.samples)
        print(f"machine: {machine()}")
        print(f"run: {args.rows} rows, {args.rounds} rounds and {args.samples} samples per timed row, results.jsonl "
              f"{size / 1e6:.0f} MB (written in {time.perf_counter() - start:.0f} s)")
        profile = tmp / "report.prof" if args.profile else None
        code, wall, cpu, rss, tail = report(folder, profile)
        print(f"command: {sys.executable} -m opmatrix report {folder}")
        print(f"exit {code}; wall {wall:.1f} s; CPU {cpu:.1f} s; peak RSS {rss:.0f} MB; load average after "
              f"{os.getloadavg()[0]:.1f}; report.md "
              f"{(folder / 'report.md').stat().st_size / 1e6 if (folder / 'report.md').exists() else 0:.1f} MB, "
              f"report.html {(folder / 'report.html').stat().st_size / 1e6 if (folder / 'report.html').exists() else 0:.1f} MB")
        if code:
            print(tail)
        if profile:
            import pstats

            pstats.Stats(str(profile)).sort_stats("cumulative").print_stats(40)
        if args.keep:
            print(f"kept: {tmp}")
        return code
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
