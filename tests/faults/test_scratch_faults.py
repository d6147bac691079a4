"""The run's scratch is pruned after each session by a stated policy (issue 29, item 9; opmatrix.cellenv.scratch):
a build that writes 3 MiB of output left it all under .opmatrix/<run>/ forever. Now a job whose row did not fail
loses its folder, a failed job keeps its folder with every file cut to its last 1 MiB (its row already carries the
last 4,000 characters), and the run says how much it freed. `--keep-scratch` keeps everything. On the embedded-Ray
path and --no-ray."""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from opmatrix.cellenv.scratch import KEEP_BYTES
from tests.faults import plugins
from tests.faults.harness import rows
from tests.faults.runs import Run

NOISE = 3 * 1024 * 1024
NOISY = plugins.impl("time.sleep(w['ms'] / 1e3)\nout.copy_(x * 2)", prelude="import sys, time", setup=f"""
    for _ in range({NOISE // 1024}):
        sys.stdout.write("x" * 1023 + "\\n")
    sys.stdout.write("LAST LINE OF THE BUILD\\n")
    sys.stdout.flush()
    if w["n"] == 32:
        raise RuntimeError("injected build failure after 3 MiB of output")
""")


def noisy_matrix(root: Path) -> Path:
    plugins.write_tree(root, {"plain": (plugins.PLAIN_SPEC, {"torch": NOISY})}, {"torch": plugins.adapter("wallclock")})
    text = textwrap.dedent(plugins.PLAIN_MATRIX).replace('["w0", "w1", "w2"]', '["w0", "w1"]')
    (root / "m.toml").write_text(text)
    return root / "m.toml"


def size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


@pytest.mark.parametrize("ray", [False, True], ids=["no-ray", "embedded-ray"])
def test_scratch_is_pruned_by_the_policy_and_the_run_says_how_much(tmp_path, run_id, ray, observe):
    matrix = noisy_matrix(tmp_path)
    run = Run(matrix, tmp_path / "reports", run_id, "--fail-on", "lost,env_error,crashed", ray=ray)
    code = run.wait(240)
    out = run.out_path.read_text()
    stored = {r["workload"]: r for r in rows(run.folder)}
    jobs = Path(run.scratch) / "cpu.host" / "jobs"
    folders = sorted(p.name for p in jobs.iterdir()) if jobs.is_dir() else []
    logs = {p.parent.name: p.stat().st_size for p in jobs.glob("*/worker.log")}
    said = re.search(r"scratch .*: freed ([0-9.]+) MiB", out)
    print(f"exit {code}; rows {[(w, r['status']) for w, r in stored.items()]}; job folders left {folders}; "
          f"worker.log sizes {logs}; scratch now {size(Path(run.scratch))} bytes; said: {said and said[0]}")
    observe(f"3 MiB build logs in the scratch ({'Ray' if ray else 'no Ray'})", "pruned, freed said",
            ("pruned" if folders and all(s <= KEEP_BYTES for s in logs.values()) else "not pruned")
            + (", freed said" if said else ", not said"))

    assert code == 0, run.stderr[-3000:]
    assert stored["w0"]["status"] == "ok" and stored["w1"]["status"] == "compile_error", stored
    assert "LAST LINE OF THE BUILD" in stored["w1"]["stderr_tail"]
    assert folders and all("w1" in name for name in folders), folders  # the ok job's folders are gone
    assert logs and all(s <= KEEP_BYTES for s in logs.values()), logs
    kept = next(jobs.glob("*/worker.log")).read_text()
    assert kept.rstrip().endswith("LAST LINE OF THE BUILD") or "injected build failure" in kept[-4000:]
    assert said and float(said[1]) >= 2 * NOISE / 2**20 - 1, out[-2000:]  # w0's 3 MiB (and its twin's) and w1's cut
