"""Run ids that are not one safe path component (issue 29, item 3): `--run-id ../../x`, an absolute path, `..`, a
hidden name or one with a slash would put the run folder, or the cell scratch, outside reports/ and .opmatrix/. Each
is refused with exit 2 before anything is written, by `run` (embedded Ray and --no-ray), `profile` and the folder
helper `validate` shares with it."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from opmatrix import paths
from opmatrix import cli
from opmatrix.paths import new_run_folder
from tests.faults import plugins
from tests.faults.harness import opmatrix


def bad_ids(tmp_path: Path) -> dict[str, str]:
    tag = uuid.uuid4().hex[:8]
    return {"climbs out": f"../../{tmp_path.name}-escape-{tag}", "absolute": str(tmp_path / f"abs-{tag}"),
            "dot-dot": "..", "hidden": f".hidden-{tag}", "slash": f"a/b-{tag}", "empty": "",
            "newline": f"x\ny-{tag}"}


def written(root: Path, before: set[Path]) -> set[Path]:
    return {p for p in root.rglob("*")} - before


@pytest.mark.parametrize("ray", [False, True], ids=["no-ray", "embedded-ray"])
def test_an_unsafe_run_id_is_refused_before_anything_is_written(tmp_path, ray, capsys, observe):
    """Every kind through the CLI's entry point in this process (fast); the one that climbs out also as a real
    `opmatrix run` subprocess, with and without --resume."""
    matrix = plugins.plain_matrix(tmp_path)
    reports = tmp_path / "deep" / "reports"
    ids = bad_ids(tmp_path)
    before = set(tmp_path.parent.iterdir()) | set(tmp_path.rglob("*"))
    scratch_before = set(paths.SCRATCH.iterdir()) if paths.SCRATCH.is_dir() else set()
    where = () if ray else ("--no-ray",)
    seen = {}
    for what, rid in ids.items():
        code = cli.main(["run", str(matrix), *where, "--run-id", rid, "--reports", str(reports)])
        seen[what] = (code, capsys.readouterr().err)
    for resume in ((), ("--resume",)):
        out = opmatrix("run", matrix, *where, "--run-id", ids["climbs out"], "--reports", reports, *resume,
                       timeout=60)
        seen[f"subprocess {' '.join(resume)}"] = (out.returncode, out.stderr)
    for what, (code, err) in seen.items():
        print(f"{what}: exit {code}: {err.strip()[:150]}")
    new = (set(tmp_path.parent.iterdir()) | set(tmp_path.rglob("*"))) - before
    # other tests' runs (pytest-xdist) add their own scratch meanwhile (a CI run saw `.opmatrix/aot`, another test's
    # run id): only what these ids would make counts: a folder named from one of them (its tag, or `a` of `a/b-...`),
    # a cell folder where an empty id would put it, and cells under the root ('..')
    tag = ids["hidden"].rsplit("-", 1)[1]
    new_scratch = {p for p in (set(paths.SCRATCH.iterdir()) if paths.SCRATCH.is_dir() else set()) - scratch_before
                   if tag in p.name or p.name in ("a", "cpu.host")} | {p for p in [paths.ROOT / "cpu.host"]
                                                                       if p.exists()}
    codes = sorted({code for code, _ in seen.values()})
    observe(f"unsafe --run-id ({len(ids)} kinds, {'Ray' if ray else 'no Ray'})", "exit 2, nothing written",
            f"exit {'/'.join(map(str, codes))}, " + ("nothing written" if not new and not new_scratch else
                                                      f"{len(new) + len(new_scratch)} written"))
    for what, (code, err) in seen.items():
        assert code == 2, (what, err)
        assert "a run id is one folder name" in err and "Traceback" not in err, (what, err)
    assert not new, sorted(map(str, new))
    assert not new_scratch, sorted(map(str, new_scratch))


def test_profile_and_validate_refuse_an_unsafe_run_id(tmp_path, observe):
    reports = tmp_path / "reports"
    ids = bad_ids(tmp_path)
    refused = 0
    for what, rid in ids.items():
        with pytest.raises(paths.BadRunId):
            new_run_folder(reports, rid, "validate", "step", "validate.json")
        refused += 1
    out = opmatrix("profile", "opmatrix.profile.targets:llama_step", "--preset", "tiny", "--steps", "1",
                   "--run-id", ids["climbs out"], "--reports", reports, timeout=120)
    print(f"profile --run-id {ids['climbs out']!r}: exit {out.returncode}: {out.stderr.strip()[-300:]}")
    leaked = [p for p in tmp_path.parent.iterdir() if "escape" in p.name]
    observe("unsafe --run-id (profile, validate)", "exit 2, nothing written",
            f"exit {out.returncode}, " + ("nothing written" if not leaked and not reports.exists() else "written"))
    assert refused == len(ids)
    assert out.returncode == 2 and "a run id is one folder name" in out.stderr, out.stderr[-2000:]
    assert not leaked and not reports.exists()
