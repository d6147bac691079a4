"""Matrix files: valid ones load; invalid ones fail with the file, the key and what is allowed."""
import pytest

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


def test_project_matrix_files_are_valid():
    from opmatrix import paths

    files = sorted(paths.MATRICES.glob("*.toml"))
    assert paths.DEFAULT_MATRIX in files
    for path in files:
        load_matrix(path)


def test_missing_file_lists_the_project_matrices(tmp_path):
    with pytest.raises(MatrixError, match=r"no such matrix file .*default\.toml"):
        load_matrix(tmp_path / "nope.toml")


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
    with pytest.raises(MatrixError, match=r"exclude\[0\]\.device = 'gpu9' names nothing.*allowed: cpu"):
        load_matrix(write_matrix(VALID + '[[exclude]]\ndevice = "gpu9"\n'))


def test_empty_exclude_is_rejected(write_matrix):
    with pytest.raises(MatrixError, match="an exclude needs at least one of"):
        load_matrix(write_matrix(VALID + '[[exclude]]\nreason = "x"\n'))


def test_duplicate_device_ids_are_rejected(write_matrix):
    dup = VALID.replace("[[toolchain]]", '[[device]]\nid = "cpu"\nvendor = "cpu"\narch = "x"\n[[toolchain]]')
    with pytest.raises(MatrixError, match="device names must be unique; repeated: cpu"):
        load_matrix(write_matrix(dup))


def test_fewer_than_three_trials_is_rejected(write_matrix):
    with pytest.raises(MatrixError, match=r"run\.trials: .*greater than or equal to 3"):
        load_matrix(write_matrix('[run]\ntrials = 1\n' + VALID.replace('name = "t"\n', "")))


def test_bad_name_regex_is_reported(write_matrix):
    with pytest.raises(MatrixError, match=r"device\[0\]\.name: not a regular expression"):
        load_matrix(write_matrix(VALID.replace('arch = "auto"', 'arch = "auto"\nname = "H200("')))
