"""How long `opmatrix report` takes, and how much memory, on a synthetic run of N rows (issue 29, item 8).

    python lab/bench_report.py --rows 200000            # wall time and peak RSS of `opmatrix report`
    python lab/bench_report.py --rows 20000 --profile   # and the top of a cProfile of it
    python lab/bench_report.py --rows 5000 --compare    # the two toolchains declared a [[compare]]
    python lab/bench_report.py --rows 200000 --stages   # and the CPU and peak RSS of each stage of the report

The run is written into a temporary folder (removed afterwards unless --keep) and never committed. Its shape, a
large nightly sweep: 2 toolchains x 4 devices (2 with a host, 2 without: their rows are `no_host`) x 8 kernels x 5
backends (torch the baseline; triton, tilelang, tilelang[tuned], cutlass) x 3 dtypes, and as many workloads per
kernel as N needs. On a device with a host every job was timed in interleaved rounds (--rounds, the baseline's A/A
twin in every round) and keeps --samples raw samples; one row in 40 failed to compile, one in 25 is unsupported.
Numbers are drawn from a seeded generator, so the same arguments write the same run.

It prints the machine, the command, the rows, the size of results.jsonl, the wall time and the peak resident memory
of the `opmatrix report` process (os.wait4's ru_maxrss). --stages then runs the stages of `opmatrix report`
(report.build.finish) one after another in a process of their own and prints each one's CPU time
(time.process_time) and the peak RSS after it. Figures go in docs/results.md, never in this file.
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from opmatrix.core.acceptance import Acceptance  # noqa: E402
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
    """The run's rows as JSON lines, at most n of them: every field of a Result (its defaults, from the store's own
    serialiser) with this row's values; write_run checks the first ones with the store's reader."""
    rng, draws = random.Random(seed), np.random.default_rng(seed)
    blank = json.loads(Result(run_id=RUN_ID, status="ok").to_json())
    workloads = -(-n // jobs_per_workload())
    written = 0
    for w in range(workloads):
        for toolchain in TOOLCHAINS:
            for device, hosted in DEVICES.items():
                for kernel in KERNELS:
                    for dtype in DTYPES:
                        group = f"{device}.{toolchain}/{kernel}/w{w}/{dtype}"
                        base_ms = rng.uniform(0.01, 5.0)
                        base_rounds = base_ms * draws.normal(1, 0.01, rounds)
                        aa_rounds = (base_ms * draws.normal(1, 0.01, rounds)).tolist()
                        for backend, variant in BACKENDS:
                            if written == n:
                                return
                            written += 1
                            row = dict(blank, cell=f"{device}.{toolchain}", device=device, toolchain=toolchain,
                                       kernel=kernel, workload=f"w{w}", dtype=dtype, backend=backend,
                                       variant=variant, shape=f"n=w{w}", flops=2e9, min_bytes=6e6, host="bench",
                                       python="3.12", torch="2.11.0", triton="3.6.0", tilelang="0.1.15",
                                       env_hash=f"{device}{toolchain}", started_at="2026-12-02T00:00:00+00:00")
                            if hosted:
                                _outcome(row, rng, draws, group, base_rounds, aa_rounds, samples)
                            else:
                                row.update(status="no_host", error=f"no host of this run has a {device}")
                            yield json.dumps(row)


def _outcome(row: dict, rng, draws, group: str, base_rounds, aa_rounds: list[float], samples: int) -> None:
    """A hosted job: a compile error (1 in 40), unsupported (1 in 25), else timed in rounds with the baseline."""
    backend, draw = row["backend"], rng.random()
    if backend != "torch" and draw < 0.025:
        row.update(status="compile_error", phase="build", error=f"RuntimeError: no viable overload ({group})\n  at x")
        return
    if backend != "torch" and draw < 0.065:
        row.update(status="unsupported", phase="load", error=f"{backend} does not cover {row['dtype']} on "
                                                            f"{row['device']}")
        return
    ratio = 1.0 if backend == "torch" else rng.uniform(0.5, 2.0)
    mine = base_rounds / ratio * draws.normal(1, 0.01, len(base_rounds))
    median = float(np.median(mine))
    tflops = 2e9 / (median * 1e-3) / 1e12
    row.update(status="ok", phase="done", trials=3, rel_err=1e-4, tolerance=2e-3, compile_s=rng.uniform(0.1, 20),
               compile_cache="cold", config="{}", timer="cuda-events", pairing="interleaved", rounds=len(mine),
               round_group=group, median_ms=median, p10_ms=median * 0.98, p90_ms=median * 1.02,
               samples_ms=(median * draws.normal(1, 0.02, samples)).tolist(), reps=samples, round_ms=mine.tolist(),
               aa_round_ms=aa_rounds, baseline_round_ms=[] if backend == "torch" else base_rounds.tolist(),
               round_position=list(range(len(mine))), tflops=tflops, gbps=6e6 / (median * 1e-3) / 1e9,
               ceiling_tflops=700.0, ceiling_gbps=4000.0, roofline_pct=100 * tflops / 700.0,
               stability_pct=rng.uniform(0, 3), clock_dropped=False)


def write_run(folder: Path, n: int, rounds: int, samples: int, compare: bool = False) -> int:
    folder.mkdir(parents=True)
    with open(folder / "results.jsonl", "w", encoding="utf-8") as fh:
        for i, line in enumerate(rows(n, rounds, samples)):
            if i < 1000:  # the store's reader accepts them (field names and types)
                Result.from_json(line)
            fh.write(line + "\n")
    manifest = RunManifest(run_id=RUN_ID, matrix="bench", planned_jobs=n, baseline="torch",
                           acceptance=Acceptance("torch", 1.05),
                           lines_of_code={f"{k}/{b}": 50 for k in KERNELS for b, _ in BACKENDS},
                           compare=[list(TOOLCHAINS)] if compare else [])
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


def stages(folder: Path) -> None:
    """The stages of report.build.finish, in its order, each timed (CPU) with the process's peak RSS after it."""
    import io
    import resource

    from rich.console import Console

    from opmatrix import report
    from opmatrix.report.build import decided
    from opmatrix.store import ResultStore

    clock = [time.process_time()]

    def done(name: str) -> None:
        now = time.process_time()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"| {name} | {now - clock[0]:.1f} s | {peak:,.0f} MB |", flush=True)
        clock[0] = now

    print("| stage | CPU | peak RSS after it |\n| --- | ---: | ---: |")
    import matplotlib  # noqa: F401  (imported by report.html; counted apart)
    import pandas  # noqa: F401
    import scipy.stats  # noqa: F401
    done("imports (pandas, scipy.stats, matplotlib)")
    store = ResultStore(folder)
    loaded = store.load()
    done("`store.load` (read and check results.jsonl: rows as columns, skipped lines)")
    df = store.consolidate(loaded=loaded)
    del loaded
    done("`store.consolidate` (from that reading: frame, speed-ups, results.parquet)")
    manifest = store.manifest()
    df, verdicts = decided(df, manifest)
    done("`report.build.decided` (`stats.add_paired_columns`, verdicts)")
    report.sections(df, verdicts)
    done("every report section, built once")
    report.markdown(df, manifest, verdicts)
    done("report.md rendered")
    report.write_html(df, manifest, folder / "report.html", verdicts)
    done("report.html (tables and charts)")
    report.print_terminal(df, Console(file=io.StringIO(), width=200), verdicts)
    done("terminal (first 200 rows per table)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=30, help="rounds per timed row (default 30)")
    parser.add_argument("--samples", type=int, default=100, help="raw samples kept per timed row (default 100)")
    parser.add_argument("--compare", action="store_true", help="declare the two toolchains a [[compare]] (the "
                        "report then writes the upgrade comparison too: opmatrix.upgrade.compare)")
    parser.add_argument("--profile", action="store_true", help="also print the top of a cProfile of the report")
    parser.add_argument("--stages", action="store_true", help="also time each stage of the report in a process of "
                        "its own (CPU and peak RSS after each)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary run folder (its path is printed)")
    parser.add_argument("--stages-of", type=Path, help=argparse.SUPPRESS)  # the --stages process: a run folder
    args = parser.parse_args(argv)
    if args.stages_of:
        stages(args.stages_of)
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="opmatrix-bench-report-"))
    try:
        folder = tmp / "reports" / RUN_ID
        start = time.perf_counter()
        size = write_run(folder, args.rows, args.rounds, args.samples, args.compare)
        print(f"machine: {machine()}")
        print(f"run: {args.rows} rows, {args.rounds} rounds and {args.samples} samples per timed row"
              f"{', [[compare]] a -> b' if args.compare else ''}, results.jsonl "
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
        if args.stages:
            subprocess.run([sys.executable, __file__, "--stages-of", str(folder)], check=True, cwd=ROOT)
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
