"""Planning: cells are devices x toolchains minus excludes; jobs expand kernels, workloads, dtypes, backends and
the variants an implementation declares."""
import pytest

from opmatrix import plan
from opmatrix.scheduling import hosts
from opmatrix.scheduling.hosts import HostDevice
from opmatrix.matrix import MatrixError, load_matrix

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
