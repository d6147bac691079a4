"""Matrix files: valid ones load; invalid ones fail with the file, the key, the value and what is allowed.

Hostile values: test_matrix_hostile.py; names checked against the plugin folders: test_matrix_catalog.py."""
import pytest

from opmatrix import catalog, paths
from opmatrix.matrix import MatrixError, load_matrix

VALID = """
name = "t"
backends = ["torch"]
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
[[toolchain]]
name = "host"
system = true
[[kernel]]
name = "gemm_relu"
workloads = { cpu = ["tiny_ragged"] }
dtypes = { cpu = ["float32"] }
"""


def test_valid_matrix_loads_with_defaults(write_matrix):
    m = load_matrix(write_matrix(VALID))
    assert m.name == "t"
    assert m.run.trials == 3 and m.acceptance.baseline == "torch"
    assert m.devices()["cpu"].vendor == "cpu"


@pytest.mark.parametrize("path", sorted(paths.MATRICES.glob("*.toml")), ids=lambda p: p.name)
def test_project_matrix_files_are_valid_and_name_what_exists(path):
    catalog.check(load_matrix(path))


def test_the_default_matrix_is_among_the_project_files():
    assert paths.DEFAULT_MATRIX in paths.MATRICES.glob("*.toml")


def test_missing_file_lists_the_project_matrices(tmp_path):
    with pytest.raises(MatrixError, match=r"no such matrix file .*default\.toml"):
        load_matrix(tmp_path / "nope.toml")


def test_a_directory_is_called_a_directory(tmp_path):
    (tmp_path / "a.toml").write_text("")
    with pytest.raises(MatrixError, match=rf"{tmp_path}: is a directory, not a matrix file "
                                          r"\(its \.toml files: a\.toml"):
        load_matrix(tmp_path)


def test_non_utf8_file_is_refused_with_the_offset(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes('description = "café"\n'.encode("latin-1"))
    with pytest.raises(MatrixError, match=rf"{path}: not UTF-8 text \(byte 0xe9 at offset 18\).*must be saved as "
                                          "UTF-8"):
        load_matrix(path)


def test_bad_toml_names_the_file(write_matrix):
    path = write_matrix("name = [unclosed")
    with pytest.raises(MatrixError, match=rf"{path}: not valid TOML"):
        load_matrix(path)


def test_bad_vendor_names_key_and_allowed_values(write_matrix):
    path = write_matrix(VALID.replace('vendor = "cpu"', 'vendor = "intel"'))
    with pytest.raises(MatrixError) as err:
        load_matrix(path)
    text = str(err.value)
    assert str(path) in text
    assert "device[0].vendor" in text
    assert "'nvidia', 'amd' or 'cpu'" in text and "'intel'" in text


def test_unknown_key_lists_allowed_keys(write_matrix):
    with pytest.raises(MatrixError) as err:
        load_matrix(write_matrix(VALID.replace("system = true", "system = true\npackagez = []")))
    text = str(err.value)
    assert "toolchain[0].packagez: unknown key" in text
    assert "packages" in text and "installer" in text


def test_exclude_must_name_existing_things(write_matrix):
    with pytest.raises(MatrixError,
                       match=r"exclude\[0\]\.device = 'gpu9': names no device of this file; allowed: cpu$"):
        load_matrix(write_matrix(VALID + '[[exclude]]\ndevice = "gpu9"\n'))


def test_empty_exclude_is_rejected(write_matrix):
    with pytest.raises(MatrixError, match=r"exclude\[0\]: an exclude needs at least one of device, toolchain"):
        load_matrix(write_matrix(VALID + '[[exclude]]\nreason = "x"\n'))


def test_duplicate_device_ids_are_rejected(write_matrix):
    dup = VALID.replace("[[toolchain]]", '[[device]]\nid = "cpu"\nvendor = "cpu"\narch = "x"\n[[toolchain]]')
    with pytest.raises(MatrixError, match=r"device\[1\]\.id = 'cpu': repeats device\[0\]\.id; each must be unique"):
        load_matrix(write_matrix(dup))


def test_fewer_than_three_trials_is_rejected(write_matrix):
    with pytest.raises(MatrixError,
                       match=r"run\.trials = 1: .*greater than or equal to 3; allowed: 3 <= value <= 1000"):
        load_matrix(write_matrix('[run]\ntrials = 1\n' + VALID.replace('name = "t"\n', "")))


def test_bad_name_regex_is_reported(write_matrix):
    with pytest.raises(MatrixError, match=r"device\[0\]\.name = 'H200\(': not a regular expression"):
        load_matrix(write_matrix(VALID.replace('arch = "auto"', 'arch = "auto"\nname = "H200("')))


TWO_TOOLCHAINS = VALID + '[[toolchain]]\nname = "next"\nsystem = true\n'


@pytest.mark.parametrize("compare, message", [
    ('baseline = "host"\ncandidate = "nxt"', r"compare\[0\]\.candidate = 'nxt': names no toolchain of this file; "
                                             r"allowed: host, next"),
    ('baseline = "host"\ncandidate = "host"', r"compare\[0\]\.candidate = 'host': is also the baseline"),
    ('baseline = "host"\ncandidat = "next"', r"compare\[0\]\.candidat: unknown key"),
])
def test_a_compare_must_name_two_toolchains_of_the_file(write_matrix, compare, message):
    with pytest.raises(MatrixError, match=message):
        load_matrix(write_matrix(TWO_TOOLCHAINS + "[[compare]]\n" + compare + "\n"))


def test_a_compares_candidate_cell_is_timed_inside_the_baseline_cell(write_matrix, tmp_path):
    from opmatrix.plan import cell_plans

    m = load_matrix(write_matrix(TWO_TOOLCHAINS + '[[compare]]\nbaseline = "host"\ncandidate = "next"\n'))
    (p,) = cell_plans(m, "r", tmp_path)
    assert p.cell.id == "cpu.host" and p.rival.cell.id == "cpu.next"
    assert all(j.rival for j in p.rival.jobs) and not any(j.rival for j in p.jobs)
    assert p.key(p.rival.jobs[0]).cell == "cpu.next" and p.rival.scratch_dir.endswith("cpu.next")
    assert type(p).from_json(p.to_json()) == p


def test_a_resumed_candidate_job_is_timed_beside_its_peer_and_the_baseline(write_matrix, tmp_path):
    """--resume of a [[compare]] run: a candidate job without a row runs again with the baseline toolchain's same
    backend (its peer) and the framework baseline as partners, whose rows are already stored."""
    from opmatrix.core.result import Result
    from opmatrix.plan import cell_plans
    from opmatrix.run import remaining

    text = TWO_TOOLCHAINS.replace('backends = ["torch"]', 'backends = ["torch", "tilelang"]')
    m = load_matrix(write_matrix(text + '[[compare]]\nbaseline = "host"\ncandidate = "next"\n'))
    (p,) = cell_plans(m, "r", tmp_path)
    missing = next(j for j in p.rival.jobs if j.backend == "tilelang" and j.variant == "cpu")
    stored = [Result(**p.identity(j), status="ok") for j in p.all_jobs() if j != missing]
    (left,) = remaining([p], stored, {"lost"})
    assert left.jobs == () and left.rival.jobs == (missing,)
    assert {(j.backend, j.variant, j.rival) for j in left.partners} == {("torch", "default", False),
                                                                      ("tilelang", "cpu", False)}
