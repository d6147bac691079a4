"""Planning: cells are devices x toolchains minus excludes; jobs expand kernels, workloads, dtypes, backends and
the variants an implementation declares."""
import json

import pytest

from opmatrix import cli, plan
from opmatrix.scheduling import hosts
from opmatrix.scheduling.hosts import HostDevice
from opmatrix.matrix import MatrixError, load_matrix
from tests.helpers import PROBE_SPEC

MATRIX = """
name = "p"
backends = ["torch", "tilelang", "triton"]
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
[[device]]
id = "h200"
vendor = "nvidia"
arch = "sm_90"
name = "H200"
[[device]]
id = "mi300x"
vendor = "amd"
arch = "gfx942"
[[toolchain]]
name = "pinned"
packages = ["torch==2.13.0"]
[[toolchain]]
name = "host"
system = true
devices = ["h200", "mi300x"]
[[kernel]]
name = "gemm_relu"
[kernel.workloads]
cpu = ["tiny_ragged", "ragged_257"]
nvidia = ["square_4096"]
amd = ["square_4096"]
[kernel.dtypes]
cpu = ["float32"]
nvidia = ["float16", "bfloat16"]
amd = ["float16"]
"""


def cells_of(matrix):
    return [c.id for c in plan.plan_cells(matrix)]


def test_cells_are_devices_times_toolchains_with_toolchain_device_filter(write_matrix):
    m = load_matrix(write_matrix(MATRIX))
    assert cells_of(m) == ["cpu.pinned", "h200.pinned", "h200.host", "mi300x.pinned", "mi300x.host"]


def test_cell_level_exclude_drops_the_cell(write_matrix):
    m = load_matrix(write_matrix(MATRIX + '[[exclude]]\ndevice = "mi300x"\ntoolchain = "pinned"\n'))
    assert "mi300x.pinned" not in cells_of(m) and "mi300x.host" in cells_of(m)


def test_job_level_exclude_keeps_the_cell_and_drops_matching_jobs(write_matrix):
    m = load_matrix(write_matrix(MATRIX + '[[exclude]]\ndevice = "h200"\nbackend = "triton"\ndtype = "bfloat16"\n'))
    cell = next(c for c in plan.plan_cells(m) if c.id == "h200.host")
    jobs = plan.plan_jobs(m, cell)
    assert ("triton", "bfloat16") not in {(j.backend, j.dtype) for j in jobs}
    assert ("triton", "float16") in {(j.backend, j.dtype) for j in jobs}


def test_jobs_expand_workloads_dtypes_backends_and_declared_variants(write_matrix):
    m = load_matrix(write_matrix(MATRIX))
    cpu = plan.plan_cells(m)[0]
    jobs = plan.plan_jobs(m, cpu)
    # 2 workloads x 1 dtype x (torch + tilelang[tile, ws, tuned, cpu] + triton)
    assert len(jobs) == 2 * 1 * 6
    assert {j.variant for j in jobs if j.backend == "tilelang"} == {"tile", "ws", "tuned", "cpu"}
    assert {j.variant for j in jobs if j.backend == "torch"} == {"default"}


def test_variant_exclude(write_matrix):
    m = load_matrix(write_matrix(MATRIX + '[[exclude]]\nbackend = "tilelang"\nvariant = "cpu"\n'))
    jobs = plan.plan_jobs(m, plan.plan_cells(m)[0])
    assert {j.variant for j in jobs if j.backend == "tilelang"} == {"tile", "ws", "tuned"}


def test_environment_hash_is_a_pure_function_of_the_cell_values(write_matrix):
    a = {c.id: c for c in plan.plan_cells(load_matrix(write_matrix(MATRIX)))}
    b = {c.id: c for c in plan.plan_cells(load_matrix(write_matrix(MATRIX, "again.toml")))}
    assert a["cpu.pinned"].session == b["cpu.pinned"].session
    changed = {c.id: c for c in plan.plan_cells(load_matrix(write_matrix(
        MATRIX.replace("torch==2.13.0", "torch==2.12.0"), "changed.toml")))}
    assert changed["cpu.pinned"].env_hash != a["cpu.pinned"].env_hash
    assert changed["h200.host"].env_hash == a["h200.host"].env_hash


def test_unknown_workload_names_the_spec_and_the_defined_ones(write_matrix):
    m = load_matrix(write_matrix(MATRIX.replace('"ragged_257"', '"huge"')))
    with pytest.raises(MatrixError, match=r"kernel\[0\]\.workloads\.cpu\[1\] = 'huge'.*allowed: .*square_4096"):
        plan.check_plugins(m)


def test_unknown_backend_lists_the_available_adapters(write_matrix):
    m = load_matrix(write_matrix(MATRIX.replace('"triton"]', '"cutlas"]')))
    with pytest.raises(MatrixError, match=r"backends\[2\] = 'cutlas': names no backend adapter in .*allowed: .*tilelang"):
        plan.check_plugins(m)


def test_host_devices_resolve_specific_before_fallback(write_matrix):
    m = load_matrix(write_matrix(MATRIX + '[[device]]\nid = "any-gpu"\nvendor = "nvidia"\narch = "auto"\n'
                                          'fallback = true\n'))
    h200 = HostDevice("nvidia", "0", "NVIDIA H200", "sm_90")
    a100 = HostDevice("nvidia", "1", "NVIDIA A100-SXM4-80GB", "sm_80")
    cpu = HostDevice("cpu", "", "AMD EPYC", "x86_64")
    assigned = hosts.resolve(m.device, [cpu, h200, a100])
    assert assigned["h200"] == [h200]
    assert assigned["any-gpu"] == [a100]  # the H200 went to the specific device
    assert assigned["cpu"] == [cpu]
    assert "mi300x" not in assigned


def test_plan_lists_every_job_with_where_it_comes_from_so_the_count_adds_up(tmp_path, monkeypatch, capsys):
    """The user names 4 jobs of their own kernel and 2 of a shipped one; the shipped rmsnorm's torch declares a
    variant (llama) that joins as a job of its own, and an exclude takes one out: plan's lines say each, and their
    counts add up to the cell's."""
    (tmp_path / "kernels" / "probe").mkdir(parents=True)
    (tmp_path / "kernels" / "probe" / "spec.py").write_text(PROBE_SPEC)
    for name in ("torch", "torch_compile"):
        (tmp_path / "kernels" / "probe" / f"{name}.py").write_text("def build(w, dtype, device, variant):\n    "
                                                                    "return None\n")
    (tmp_path / "m.toml").write_text("""
name = "mine"
backends = ["torch", "torch-compile"]
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
[[toolchain]]
name = "here"
system = true
[[kernel]]
name = "probe"
workloads = { cpu = ["small", "quick"] }
dtypes = { cpu = ["float32"] }
[[kernel]]
name = "rmsnorm"
workloads = { cpu = ["small_1024"] }
dtypes = { cpu = ["float32"] }
[[exclude]]
kernel = "probe"
backend = "torch-compile"
workload = "quick"
reason = "not needed"
""")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["plan", "m.toml"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("cpu.here") and " 6 jobs " in lines[0]
    listed = [line for line in lines[1:] if line.startswith("  ") and " x " in line.split("  ")[1]]
    assert sum(int(line.split(" job")[0].split()[-1]) for line in listed) == 6
    by = {line.split()[0] + " " + line.split()[2]: line for line in listed}
    assert "small, quick x float32" in by["probe torch"] and "kernels/probe/torch.py (project)" in by["probe torch"]
    assert "1 job" in by["probe torch-compile"] and "small x float32" in by["probe torch-compile"]
    llama = by["rmsnorm torch[llama]"]
    assert "rmsnorm/torch.py (shipped), a variant its VARIANTS declares" in llama
    assert "  1 job left out by exclude[0] (kernel=probe backend=torch-compile workload=quick): not needed" in lines
    assert cli.main(["plan", "m.toml", "--json"]) == 0
    (cell,) = json.loads(capsys.readouterr().out)
    assert [j["from"] for j in cell["jobs"] if j["variant"] == "llama"] == [llama.split("float32")[-1].strip()]
