"""Hostile or wrong values in a matrix file are refused when it is loaded, before any work, each with the file,
the key path, the value and what is allowed: pip options and shell text as packages, odd index URLs, Pythons
that do not exist, numbers out of bounds, repeated names."""
import tomllib

import pytest

from opmatrix import catalog
from opmatrix.matrix import MatrixError, load_matrix

BASE = """
name = "t"
backends = ["torch", "triton"]
[run]
timeout_s = 300
trials = 3
warmup_ms = 25
rep_ms = 100
[acceptance]
min_speedup = 1.05
max_rel_err = 0.01
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
[[device]]
id = "gpu"
vendor = "nvidia"
arch = "sm_90"
[[toolchain]]
name = "host"
system = true
[[toolchain]]
name = "pinned"
python = "3.11"
packages = ["torch==2.5.1", "triton>=3.1,<4"]
env = { OMP_NUM_THREADS = "4" }
[toolchain.index]
nvidia = "https://download.pytorch.org/whl/cu124"
[[kernel]]
name = "gemm_relu"
timeout_s = 60
workloads = { cpu = ["tiny_ragged"], nvidia = ["square_4096"] }
dtypes = { cpu = ["float32"], nvidia = ["float16"] }
"""

# key path -> (the text in BASE that holds its value, that text with the value as {})
SLOTS = {
    "toolchain[1].packages[0]": ('"torch==2.5.1"', "{}"),
    "toolchain[1].index.nvidia": ('nvidia = "https://download.pytorch.org/whl/cu124"', "nvidia = {}"),
    "toolchain[1].python": ('python = "3.11"', "python = {}"),
    "run.timeout_s": ("timeout_s = 300", "timeout_s = {}"),
    "run.trials": ("trials = 3", "trials = {}"),
    "run.warmup_ms": ("warmup_ms = 25", "warmup_ms = {}"),
    "run.rep_ms": ("rep_ms = 100", "rep_ms = {}"),
    "acceptance.min_speedup": ("min_speedup = 1.05", "min_speedup = {}"),
    "acceptance.max_rel_err": ("max_rel_err = 0.01", "max_rel_err = {}"),
    "kernel[0].timeout_s": ("timeout_s = 60", "timeout_s = {}"),
    "device[1].arch": ('arch = "sm_90"', "arch = {}"),
}


def with_value(key: str, toml_value: str, base: str = BASE) -> str:
    old, template = SLOTS[key]
    assert base.count(old) == 1, old
    return base.replace(old, template.format(toml_value))


def refusal(path) -> str:
    with pytest.raises(MatrixError) as err:
        catalog.check(load_matrix(path))
    return str(err.value)


def assert_refused(path, key: str, value, allowed: str) -> None:
    """The message names the file, and one line names the key path, the value and what is allowed."""
    text = refusal(path)
    assert text.startswith(f"{path}: "), text
    lines = [line.strip() for line in text.splitlines()[1:] if line.strip().startswith(f"{key} = {value!r}: ")]
    assert lines, f"no line for {key} = {value!r} in:\n{text}"
    assert allowed in lines[0], lines[0]


def check(write_matrix, key: str, toml_value: str, allowed: str, base: str = BASE) -> None:
    value = tomllib.loads(f"v = {toml_value}")["v"]
    assert_refused(write_matrix(with_value(key, toml_value, base)), key, value, allowed)


def test_the_base_matrix_is_valid(write_matrix):
    catalog.check(load_matrix(write_matrix(BASE)))


PEP508 = "allowed: a PEP 508 requirement such as 'torch==2.5.1'"


@pytest.mark.parametrize("package", [
    "-r/etc/hostname", "--index-url=https://evil.example/simple", "-e git+https://evil.example/x.git", "-rreqs.txt",
    "torch; rm -rf /", "torch && id", "torch|id", "torch`id`", "torch==2.0; python_version == '$(id)'",
    "torch\\nnumpy", "https://evil.example/torch.whl", "torch @ https://evil.example/torch.whl",
    "torch @ file:///etc/passwd", "torch==2.x", "torch===anything", "", "../torch",
])
def test_packages_must_be_pep508_requirements(write_matrix, package):
    allowed = "~= with a PEP 440 version" if "===" in package else PEP508
    check(write_matrix, "toolchain[1].packages[0]", f'"{package}"', allowed)


@pytest.mark.parametrize("package", [
    "torch", "torch==2.5.1", "torch[opt]>=2,<3", "numpy; python_version < '3.13'", "torch==2.5.*",
    "torch==2.5.1+cu124", "torch~=2.5", "torch != 2.4.0", "tilelang==0.1.6.post1",
])
def test_ordinary_requirements_are_accepted(write_matrix, package):
    load_matrix(write_matrix(with_value("toolchain[1].packages[0]", f'"{package}"')))


def test_a_url_requirement_needs_allow_urls(write_matrix):
    url = '"torch @ https://download.pytorch.org/whl/torch-2.5.1-cp311-linux_x86_64.whl"'
    check(write_matrix, "toolchain[1].packages[0]", url, "set allow_urls = true in this toolchain")
    text = with_value("toolchain[1].packages[0]", url).replace('name = "pinned"', 'name = "pinned"\nallow_urls = true')
    toolchain = load_matrix(write_matrix(text, "urls.toml")).toolchain[1]
    assert toolchain.allow_urls and "allow_urls" not in toolchain.model_dump()  # environment hashes unchanged


@pytest.mark.parametrize("url", [
    "javascript:alert(1)", "file:///etc", "ftp://mirror.example/simple", "https://", "download.pytorch.org/whl",
    "https://exa mple.com/simple", "-https://x.example", "http:/x", "data:text/html,hi", "",
])
def test_index_urls_must_be_http_with_a_host(write_matrix, url):
    check(write_matrix, "toolchain[1].index.nvidia", f'"{url}"', "an http:// or https:// URL with a host")


@pytest.mark.parametrize("python", ["9.9", "3.7", "3.15", "2.7", "python3", "3.11; rm -rf /", "../bin/python", ""])
def test_python_must_exist(write_matrix, python):
    check(write_matrix, "toolchain[1].python", f'"{python}"', "allowed: 3.8, 3.9, 3.10, 3.11, 3.12, 3.13, 3.14, "
                                                                "or an absolute path to an interpreter")


@pytest.mark.parametrize("python", ["3.8", "3.14", "/usr/bin/python3.11", "/opt/py/bin/python3"])
def test_existing_pythons_are_accepted(write_matrix, python):
    load_matrix(write_matrix(with_value("toolchain[1].python", f'"{python}"')))


def test_python_as_a_toml_number_is_refused(write_matrix):
    check(write_matrix, "toolchain[1].python", "3.11", "valid string")


@pytest.mark.parametrize("key, toml_value, allowed", [
    *[("run.timeout_s", v, "allowed: 0 < value <= 86400, finite") for v in ("inf", "nan", "-inf", "1e38", "0",
                                                                             "-5", "86401")],
    *[("kernel[0].timeout_s", v, "allowed: 0 < value <= 86400, finite") for v in ("inf", "nan", "1e38", "0")],
    *[("run.trials", v, "allowed: 3 <= value <= 1000") for v in ("2", "1001", "100000")],
    *[("run.warmup_ms", v, "allowed: 0 <= value <= 60000, finite") for v in ("inf", "nan", "-1", "60001")],
    *[("run.rep_ms", v, "allowed: 0 < value <= 60000, finite") for v in ("0", "nan", "1e9")],
    *[("acceptance.min_speedup", v, "allowed: 0 < value <= 100, finite") for v in ("0", "inf", "nan", "101")],
    *[("acceptance.max_rel_err", v, "allowed: 0 < value, finite") for v in ("nan", "inf", "0")],
])
def test_numbers_must_be_finite_and_within_bounds(write_matrix, key, toml_value, allowed):
    check(write_matrix, key, toml_value, allowed)


@pytest.mark.parametrize("key, toml_value, allowed", [
    ("run.timeout_s", '"300"', "valid number"), ("run.trials", "3.5", "valid integer"),
    ("run.trials", "true", "valid integer"), ("run.trials", '"5"', "valid integer"),
])
def test_numbers_are_not_coerced_from_other_types(write_matrix, key, toml_value, allowed):
    check(write_matrix, key, toml_value, allowed)


def test_bounds_at_the_edges_are_accepted(write_matrix):
    text = with_value("run.timeout_s", "86400", with_value("run.trials", "1000", with_value("run.rep_ms", "60000")))
    m = load_matrix(write_matrix(with_value("acceptance.min_speedup", "100", text)))
    assert (m.run.timeout_s, m.run.trials, m.run.rep_ms, m.acceptance.min_speedup) == (86400, 1000, 60000, 100)


@pytest.mark.parametrize("arch", ["sm_90; rm -rf /", "$(id)", "-arch=x", ""])
def test_device_arch_is_a_plain_name(write_matrix, arch):
    check(write_matrix, "device[1].arch", f'"{arch}"', "String should match pattern")


def test_env_names_and_values_are_checked(write_matrix):
    path = write_matrix(BASE.replace('{ OMP_NUM_THREADS = "4" }', '{ "BAD-NAME" = "1", GOOD = "a\\u0000b" }'))
    text = refusal(path)
    assert "toolchain[1].env.BAD-NAME[key] = 'BAD-NAME': String should match pattern" in text
    assert "toolchain[1].env.GOOD = 'a\\x00b': contains a NUL character" in text


@pytest.mark.parametrize("backend", ["../../tmp/evil", "torch.compile", "Torch", "/abs"])
def test_backend_names_cannot_leave_the_backends_folder(write_matrix, backend):
    path = write_matrix(BASE.replace('backends = ["torch", "triton"]', f'backends = ["torch", "{backend}"]'))
    assert_refused(path, "backends[1]", backend, "String should match pattern '^[a-z0-9][a-z0-9_-]*$'")


DEVICE = '[[device]]\nid = "{}"\nvendor = "cpu"\narch = "auto"\n'


@pytest.mark.parametrize("extra, key, value", [
    (DEVICE.format("gpu2") + DEVICE.format("cpu"), "device[3].id", "cpu"),
    ('[[toolchain]]\nname = "host"\nsystem = true\n', "toolchain[2].name", "host"),
    ('[[kernel]]\nname = "gemm_relu"\nworkloads = {}\ndtypes = {}\n', "kernel[1].name", "gemm_relu"),
])
def test_repeated_names_point_at_the_second_occurrence(write_matrix, extra, key, value):
    table, field = key.split("[")[0], key.split(".")[-1]
    assert_refused(write_matrix(BASE + extra), key, value, f"repeats {table}[0].{field}; each must be unique")


@pytest.mark.parametrize("old, new, key, value", [
    ('["torch", "triton"]', '["torch", "triton", "torch"]', "backends[2]", "torch"),
    ('"triton>=3.1,<4"]', '"triton>=3.1,<4", "torch==2.5.1"]', "toolchain[1].packages[2]", "torch==2.5.1"),
    ('cpu = ["tiny_ragged"]', 'cpu = ["tiny_ragged", "tiny_ragged"]', "kernel[0].workloads.cpu[1]", "tiny_ragged"),
    ('cpu = ["float32"]', 'cpu = ["float32", "float32"]', "kernel[0].dtypes.cpu[1]", "float32"),
])
def test_repeated_list_entries_point_at_the_repeat(write_matrix, old, new, key, value):
    first = key.rsplit("[", 1)[0] + "[0]"
    assert_refused(write_matrix(BASE.replace(old, new)), key, value, f"repeats {first}; each must be unique")


def test_every_problem_is_listed_at_once(write_matrix):
    text = with_value("run.timeout_s", "inf", with_value("toolchain[1].python", '"9.9"'))
    message = refusal(write_matrix(with_value("toolchain[1].packages[0]", '"-r/etc/hostname"', text)))
    assert "3 problem(s)" in message


def test_names_that_become_folder_names_are_bounded_and_long_error_lists_are_capped(write_matrix):
    """A 240-character toolchain name would pass, then end a run in ENAMETOOLONG: refused at validation; 3,000
    unknown backends print the first few problems and a count, not a megabyte."""
    from opmatrix.matrix import PROBLEMS_SHOWN, MatrixError, load_matrix

    long_name = BASE.replace('name = "host"', f'name = "{"t" * 240}"', 1)
    with pytest.raises(MatrixError, match="at most 64 characters"):
        load_matrix(write_matrix(long_name))
    unknown = ", ".join(f'"nosuch{i}"' for i in range(3000))
    many = BASE.replace('backends = ["torch", "triton"]', f"backends = [{unknown}]")
    from opmatrix import plan

    with pytest.raises(MatrixError) as raised:
        plan.check_plugins(load_matrix(write_matrix(many)))
    text = str(raised.value)
    assert f"and {3000 - PROBLEMS_SHOWN} more" in text and len(text) < 20_000
