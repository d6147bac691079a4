"""The analysis tools behind the NOTES (tools/: each reads stored runs through opmatrix's public functions) run on
the committed runs and say what they claim to; none imports a private name of opmatrix. The one-GPU sweeps, the
scripts for a GPU host driven by hand and the suite's own profiling are in lab/, which no test imports."""
import ast
import importlib
import importlib.util
import re
from pathlib import Path

from tests.helpers import REPO as ROOT

TOOLS = ROOT / "tools"


def tool(name: str):
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_aa_noise_separates_launch_bound_calls_from_device_bound_ones(capsys):
    assert tool("aa_noise").main(["20261130-h200-model"]) == 0
    lines = capsys.readouterr().out.splitlines()
    decode = next(line for line in lines if line.startswith("rope") and "llama_decode" in line)
    prefill = next(line for line in lines if line.startswith("rope") and "llama_prefill" in line)
    assert " launch " in decode and " device " in prefill  # 0.125 ms of host-side launches vs 0.48 ms of copies


def test_aa_noise_by_distance_buckets_every_paired_round(capsys):
    runs = ["20261130-h200-decide-a"]
    buckets = tool("aa_noise").by_distance(runs, "gemm_relu")
    assert buckets and all(values for values in buckets.values())
    tool("aa_noise").print_by_distance(runs, "gemm_relu")
    assert "slots apart" in capsys.readouterr().out


def test_share_of_ceiling_puts_every_rounded_report_figure_inside_its_interval(capsys):
    """The report prints rmsnorm's share of the copy ceiling rounded to a percent; the tool's per-round median and
    interval must agree with the row's stored GB/s, and the two-row TileLang variant is read by its label."""
    import pandas as pd

    from opmatrix import paths
    from opmatrix.store import load_run, run_dir

    run = "20261201-h200-rmsnorm-two-rows"
    assert tool("share_of_ceiling").main([run, "rmsnorm", "tilelang[two_rows]", "triton"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 8 and all("30 rounds" in line for line in lines)  # 2 workloads x 2 dtypes x 2 contestants
    df = load_run(run_dir(run, paths.REPORTS))
    for line in lines:
        workload, dtype, label, gbps = line.split()[:4]
        estimate, lo, hi = (float(v) for v in re.search(r"([\d.]+) % \[([\d.]+), ([\d.]+)\]", line).groups())
        assert lo <= estimate <= hi
        row = df[(df.workload == workload) & (df.dtype == dtype) & (df.backend == label.split("[")[0])
                 & (df.variant == (label.split("[")[1].rstrip("]") if "[" in label else "default"))].iloc[0]
        assert pd.notna(row.gbps) and abs(estimate - 100 * row.gbps / row.ceiling_gbps) < 0.5  # median of rounds
        assert int(gbps) == round(row.gbps)


def test_share_of_ceiling_refuses_a_kernel_the_run_has_not(capsys):
    assert tool("share_of_ceiling").main(["20261201-h200-rmsnorm-two-rows", "gemm_relu"]) == 2
    assert "no ok rows of gemm_relu" in capsys.readouterr().err


def test_paired_against_names_the_rounds_each_interval_was_drawn_from(capsys):
    assert tool("paired_against").main(["20261201-h200-rmsnorm-two-rows", "rmsnorm", "tilelang",
                                        "tilelang[two_rows]"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4  # 2 workloads x 2 dtypes, only the named contestant
    assert all(re.search(r"tilelang\[two_rows\] vs tilelang: \d\.\d\dx \[\d\.\d\d, \d\.\d\d\] \(30 rounds\)$", line)
               for line in lines), lines


def test_runs_agree_compares_the_intervals_of_two_identical_runs(capsys):
    assert tool("runs_agree").main(["20261130-h200-decide-a", "20261130-h200-decide-b"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert re.match(r"\d+ of \d+ speed-ups agree within their intervals \(\d+ rows in one run only\)$", first), first


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # its parent is a module, not a package
        return False


def _opmatrix_names(path: Path):
    """(line, module, name) of every opmatrix name a tool file uses: what it imports, and the attributes it reads
    of an opmatrix module it imported (`stats.x`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    modules = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "opmatrix":
                    yield node.lineno, alias.name, ""
                    modules[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "opmatrix":
            for alias in node.names:
                yield node.lineno, node.module, alias.name
                if _is_module(f"{node.module}.{alias.name}"):  # `from opmatrix.decide import stats`
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            yield node.lineno, modules[node.value.id], node.attr


def test_the_tools_use_only_public_names_of_opmatrix():
    """A tool calls the library's public functions (a figure in a NOTES is what opmatrix computes), never a
    private one: a private name is free to change under it. What a tool needs is made public, or the tool goes."""
    assert sorted(p.name for p in TOOLS.iterdir() if p.name != "__pycache__") == [
        "aa_noise.py", "paired_against.py", "report_screenshot.py", "runs_agree.py", "share_of_ceiling.py"]
    private = [f"tools/{path.name}:{line}: {module}{'.' + name if name else ''}"
               for path in sorted(TOOLS.glob("*.py")) for line, module, name in _opmatrix_names(path)
               if name.startswith("_") or any(part.startswith("_") for part in module.split("."))]
    assert not private, "private opmatrix names used by tools: " + ", ".join(private)
    for path in sorted(TOOLS.glob("*.py")):  # and every name a tool imports exists
        for line, module, name in _opmatrix_names(path):
            assert not name or hasattr(importlib.import_module(module), name), f"tools/{path.name}:{line}: {name}"


def test_no_test_reaches_into_lab():
    """lab/ holds one-GPU sweeps, GPU-host scripts and the suite's own profiling: not the product, not shipped
    (the wheel's files are checked in test_installed), imported by no test."""
    assert (ROOT / "lab").is_dir()
    reaching = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "tests").rglob("*.py"))
                for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                if re.search(r"""["'/]lab["'/]|\blab\.|\bimport lab\b""", line) and p.name != "test_tools.py"]
    assert not reaching, reaching
