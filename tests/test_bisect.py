"""`opmatrix bisect` for real on the CPU, against a planted truth: the test builds a local package index of wheels
fakeblas 1.0 ... 1.7, where 1.5 doubles the time of the kernel's call; the bisection installs them into
real nox cell environments (through the toolchain's find_links folder), times each probed version against 1.0 in
the same rounds, and must name 1.5 in at most 4 search probes, then re-check its neighbours. A range without a bad
version says so after one probe (test_bisect_toolchains.py, with the bisection over named toolchains: two files, so
that `--dist loadfile` runs their probes side by side). The search logic on its own, and the flags' refusals, are
tested without runs."""
import base64
import dataclasses
import hashlib
import io
import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from opmatrix import paths
from opmatrix.matrix import MatrixError, load_matrix
from opmatrix.commands import bisect_probe
from opmatrix.upgrade import bisect
from opmatrix.upgrade.bisect import BAD, FOUND, GOOD, OPEN, RECHECK, UNCONFIRMED, UNKNOWN, Probe

VERSIONS = [f"1.{i}" for i in range(8)]
FIRST_BAD = "1.5"
CALL_S = 0.002  # one call of the kernel sleeps this long; from FIRST_BAD on, SLOWER times as long
SLOWER = 2.0  # far beyond a busy CI host's noise floor: 1.3 once read as same under three workers on 2 cores

FAKEBLAS = '''
import time
__version__ = "{version}"
SLOWER = {slower}

def scale(x, out):
    """out = 2 x, in a fixed time (a sleep: steady on a busy machine, unlike arithmetic)."""
    time.sleep({call_s} * SLOWER)
    out.copy_(x * 2)
'''
SPEC = '''
WORKLOADS = {"n256": {"n": 256}}
def describe(w): return f"n={w['n']}"
def flops(w): return float(w["n"])
def min_bytes(w, dtype): return 8.0 * w["n"]
def tolerance(dtype): return 1e-6
def make_inputs(w, dtype, device, seed):
    import torch
    return (torch.randn(w["n"], generator=torch.Generator().manual_seed(seed), dtype=getattr(torch, dtype)),)
def make_output(w, dtype, device):
    import torch
    return torch.empty(w["n"], dtype=getattr(torch, dtype))
def reference(inputs, w):
    return inputs[0].double() * 2
'''
TORCH_IMPL = f'''
import time
def build(w, dtype, device, variant):
    def fn(x, out):
        time.sleep({CALL_S})
        out.copy_(x * 2)
    return fn
'''
FB_IMPL = '''
def build(w, dtype, device, variant):
    import fakeblas
    return fakeblas.scale
'''
ADAPTERS = {"torch": "def available():\n    import torch\n    return torch.__version__\n",
            "fb": "def available():\n    import fakeblas\n    return fakeblas.__version__\n"}


def wheel(folder: Path, version: str) -> Path:
    """fakeblas-<version>-py3-none-any.whl, written by hand (a wheel is a zip with metadata and a RECORD)."""
    slower = SLOWER if tuple(map(int, version.split("."))) >= tuple(map(int, FIRST_BAD.split("."))) else 1.0
    info = f"fakeblas-{version}.dist-info"
    files = {"fakeblas/__init__.py": FAKEBLAS.format(version=version, slower=slower, call_s=CALL_S),
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: fakeblas\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: opmatrix-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = [f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
              f"{len(text.encode())}" for name, text in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = "\n".join(record) + "\n"
    path = folder / f"fakeblas-{version}-py3-none-any.whl"
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as zf:
        for name, text in files.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), text)  # same bytes every time
    # both bisect test files (run side by side) write the shared index: never rewrite a wheel in place while the
    # other side's pip may be reading it (a new one lands whole, by rename)
    if not path.is_file() or path.read_bytes() != data.getvalue():
        part = folder / f".{path.name}.{os.getpid()}.part"
        part.write_bytes(data.getvalue())
        os.replace(part, path)
    return path


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The local index (under the checkout's scratch, so that the cell environments built from it are reused
    between test runs: their hash includes the folder) and a project using it."""
    index = paths.SCRATCH / "tests-bisect-fakeblas-index"
    index.mkdir(parents=True, exist_ok=True)
    for v in VERSIONS:
        wheel(index, v)
    root = tmp_path_factory.mktemp("bisect")
    (root / "kernels" / "scale").mkdir(parents=True)
    (root / "backends").mkdir()
    (root / "kernels" / "scale" / "spec.py").write_text(SPEC)
    (root / "kernels" / "scale" / "torch.py").write_text(TORCH_IMPL)
    (root / "kernels" / "scale" / "fb.py").write_text(FB_IMPL)
    for name, text in ADAPTERS.items():
        (root / "backends" / f"{name}.py").write_text(text)
    (root / "m.toml").write_text(textwrap.dedent(f"""
        name = "fakeblas"
        backends = ["torch", "fb"]
        [run]
        timeout_s = 120
        rounds = 10
        max_rounds = 10
        burst_ms = 10
        burst_warmup_ms = 1
        warmup_ms = 1
        rep_ms = 5
        kernels_dir = "kernels"
        backends_dir = "backends"
        [[device]]
        id = "cpu"
        vendor = "cpu"
        arch = "auto"
        [[toolchain]]
        name = "host"
        system = true
        packages = ["fakeblas==1.0"]
        find_links = "{index}"
        [[kernel]]
        name = "scale"
        workloads = {{ cpu = ["n256"] }}
        dtypes = {{ cpu = ["float32"] }}
        """))
    return root, index


def bisect_cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "opmatrix", "bisect", str(root / "m.toml"), "--package", "fakeblas",
                           "--reports", str(root / "reports"), *args], capture_output=True, text=True, timeout=600)


@pytest.mark.integration
def test_bisect_finds_the_planted_slowdown_in_four_probes(project):
    root, _ = project
    # --resolution 1: a noisy round on this shared machine may widen one probe's A/A floor; the planted slowdown is
    # judged by its interval against the threshold either way
    out = bisect_cli(root, "--good", "1.0", "--bad", "1.7", "--run-id", "found", "--junit", str(root / "b.xml"),
                     "--resolution", "1")
    assert out.returncode == 1, out.stderr[-3000:]  # a bad version lies in the range: a CI gate fails
    result = json.loads((root / "reports" / "found" / "bisect.json").read_text())
    assert result["versions"] == VERSIONS  # from the index the toolchain names
    assert (result["verdict"], result["first_bad"], result["last_good"]) == (FOUND, FIRST_BAD, "1.4")
    search = [p for p in result["probes"] if p["role"] == "search"]
    assert [p["version"] for p in search] == ["1.7", "1.3", "1.5", "1.4"] and result["search_probes"] <= 4
    assert [(p["version"], p["verdict"]) for p in result["probes"] if p["role"] == RECHECK] == [("1.4", GOOD),
                                                                                             ("1.6", BAD)]
    for p in result["probes"]:  # each probe timed in the same rounds as 1.0: its interval says how much slower
        slower = p["version"] >= FIRST_BAD
        assert (p["time_lo"] > p["threshold"]) == slower and (p["verdict"] == BAD) == slower, p
    assert "## bisect fakeblas 1.0 -> 1.7: **1.5**" in out.stdout
    cases = ET.parse(root / "b.xml").getroot().find("testsuite").findall("testcase")
    assert len(cases) == len(result["probes"]) and sum(c.find("failure") is not None for c in cases) == 3
    probe_run = root / "reports" / "found" / result["probes"][0]["run"]
    rows = [json.loads(line) for line in (probe_run / "results.jsonl").read_text().splitlines()]
    assert {(r["toolchain"], r["backend_version"]) for r in rows if r["backend"] == "fb"} == {
        ("fakeblas-1.0", "1.0"), ("fakeblas-1.7", "1.7")}  # each side imported its own installed version


def planted(first_bad: str | None, unknown: tuple = (), flaky: tuple = ()):
    """A probe function over a planted truth (versions at or after first_bad are bad), counting its calls."""
    calls = []

    def probe(version: str, role: str) -> Probe:
        calls.append((version, role))
        bad = first_bad is not None and bisect_probe.Version(version) >= bisect_probe.Version(first_bad)
        verdict = UNKNOWN if version in unknown else (not bad if version in flaky and role == RECHECK else bad)
        return Probe(version, verdict if verdict == UNKNOWN else (BAD if verdict else GOOD))

    return probe, calls


@pytest.mark.parametrize("first_bad", VERSIONS[1:])
def test_the_search_finds_every_possible_first_bad_version_in_log2_probes(first_bad):
    probe, calls = planted(first_bad)
    result = bisect.bisect("fakeblas", "t", VERSIONS, probe)
    assert (result.verdict, result.first_bad) == (FOUND, first_bad)
    assert result.search_probes() <= 4  # the bad end, then at most ceil(log2(7)) = 3
    assert len(calls) - result.search_probes() <= 2  # the neighbours, those that exist beyond the good end


def test_a_neighbour_that_disagrees_leaves_the_answer_unconfirmed_and_unknown_stops_the_search():
    probe, _ = planted("1.5", flaky=("1.6",))
    assert bisect.bisect("fakeblas", "t", VERSIONS, probe).verdict == UNCONFIRMED
    probe, calls = planted("1.5", unknown=("1.3",))
    result = bisect.bisect("fakeblas", "t", VERSIONS, probe)
    assert (result.verdict, result.last_good, result.first_bad, len(calls)) == (OPEN, "1.0", "1.7", 2)
    assert "run again" in result.summary()


def test_a_probe_too_noisy_to_see_the_resolution_is_unknown_not_good():
    quiet = bisect_probe.compare.RowChange("cpu", "k", "w", "float32", "fb", status_before="ok", status_after="ok",
                                           time_ratio=1.0, time_lo=0.98, time_hi=1.02, threshold=1.05, aa_floor=0.01)
    assert bisect.judged("1.2", quiet, "r").verdict == GOOD
    noisy = dataclasses.replace(quiet, time_lo=0.3, time_hi=4.2, threshold=268.0, aa_floor=133.7)
    probe = bisect.judged("1.2", noisy, "r")
    assert probe.verdict == UNKNOWN and "too noisy to judge speed: the threshold 268" in probe.why[-1]
    assert bisect.judged("1.2", noisy, "r", watch=("correctness",)).verdict == GOOD  # speed not watched
    assert bisect.judged("1.2", noisy, "r", resolution=300).verdict == GOOD


def test_a_good_version_that_does_not_run_is_no_reference():
    gained = bisect_probe.compare.RowChange("cpu", "k", "w", "float32", "fb", outcome=bisect_probe.compare.IMPROVED,
                                            status_before="not_installed", status_after="ok")
    probe = bisect.judged("1.5", gained, "probe-01-1.5")
    assert probe.verdict == UNKNOWN and "the good version's own row is not_installed" in probe.why[0]


@pytest.mark.integration  # pip and opmatrix in subprocesses: seconds
def test_versions_and_targets_are_checked_before_any_probe(project):
    root, index = project
    m = load_matrix(root / "m.toml")
    target = bisect_probe.choose_target(m, "fakeblas", None, None, None, None, None, None)
    assert target.label() == "cpu scale n256 float32 fb" and target.toolchain == "host"
    with pytest.raises(bisect_probe.BisectError, match=r"--backend cuda: the matrix has no such backend; choices: fb"):
        bisect_probe.choose_target(m, "fakeblas", None, None, None, None, None, "cuda")
    with pytest.raises(bisect_probe.BisectError, match=r"--good 0.9: not a version the index offers; versions: 1.0"):
        bisect_probe.between(VERSIONS, "0.9", "1.7")
    with pytest.raises(bisect_probe.BisectError, match="give two or more distinct versions in increasing order"):
        bisect_probe.listed("1.5,1.2")
    assert bisect_probe.between(bisect_probe.available_versions(m, target, "fakeblas"), "1.2", "1.4") == [
        "1.2", "1.3", "1.4"]
    out = bisect_cli(root, "--good", "1.0")
    assert out.returncode == 2 and "name what to search, one way: --good V1 --bad V2" in out.stderr


def test_find_links_must_be_an_existing_absolute_folder(project, write_matrix):
    root, index = project
    text = (root / "m.toml").read_text()
    for bad, message in ((f"file://{index}", "not an absolute folder path"), ("wheels", "not an absolute folder path"),
                         ("/no/such/folder", "no such folder on this host")):
        with pytest.raises(MatrixError, match=rf"toolchain\[0\]\.find_links = '{bad}': {message}"):
            load_matrix(write_matrix(text.replace(str(index), bad)))


def test_a_probe_matrix_pins_both_sides_and_compares_them(project):
    root, index = project
    m = load_matrix(root / "m.toml")
    target = bisect_probe.choose_target(m, "fakeblas", None, None, None, None, None, None)
    derived = root / "derived.toml"
    derived.write_text(bisect_probe.toml(bisect_probe.probe_matrix(m, target, "fakeblas", "1.0", "1.5")))
    d = load_matrix(derived)
    assert [(t.name, t.packages, t.find_links) for t in d.toolchain] == [
        ("fakeblas-1.0", ["fakeblas==1.0"], str(index)), ("fakeblas-1.5", ["fakeblas==1.5"], str(index))]
    assert [(c.baseline, c.candidate) for c in d.compare] == [("fakeblas-1.0", "fakeblas-1.5")]
    assert d.kernels_dir() == m.kernels_dir() and d.backends == ["fb", "torch"]


def test_a_probe_keeps_the_excludes_that_still_apply(project, write_matrix):
    root, _ = project
    text = (root / "m.toml").read_text().replace('kernels_dir = "kernels"', f'kernels_dir = "{root}/kernels"').replace(
        'backends_dir = "backends"', f'backends_dir = "{root}/backends"')
    m = load_matrix(write_matrix(text + '[[device]]\nid = "cpu2"\nvendor = "cpu"\narch = "auto"\n'
                                 '[[exclude]]\nbackend = "fb"\nvariant = "other"\n[[exclude]]\ntoolchain = '
                                 '"host"\nworkload = "n256"\nvariant = "x"\n[[exclude]]\ndevice = "cpu2"\n'))
    target = bisect_probe.choose_target(m, "fakeblas", "cpu", None, None, None, None, None)
    kept = bisect_probe.probe_matrix(m, target, "fakeblas", "1.0", "1.5")["exclude"]
    assert kept == [{"backend": "fb", "variant": "other"}, {"workload": "n256", "variant": "x"}]
