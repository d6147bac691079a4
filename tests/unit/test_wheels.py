"""`opmatrix wheels` without the network: which requirements a matrix's toolchains name, what a resolution keeps
once the host's own packages (and what only they need) are left out, and the archive of unpacked wheels made and
turned back into wheels (opmatrix.wheelhouse). The download and an offline install from the archive, for real:
tests/cells/test_wheels.py."""
import io
import tarfile
import zipfile

import pytest

from opmatrix import wheelhouse
from opmatrix.commands import wheels
from opmatrix.core.errors import UsageError
from opmatrix.matrix import load_matrix

MATRIX = """
name = "carry"
backends = ["torch"]
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
[[toolchain]]
name = "host"
system = true
packages = ["liger-kernel==0.8.5", "helion==1.5.1"]
[[toolchain]]
name = "bare"
system = true
[[kernel]]
name = "rmsnorm"
workloads = { cpu = ["ragged_1000"] }
dtypes = { cpu = ["float32"] }
"""


def matrix(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text(MATRIX)
    return load_matrix(path)


def test_the_requirements_are_the_toolchains_pins_and_the_extra_ones_each_once(tmp_path):
    m = matrix(tmp_path)
    wanted, indexes = wheels.requirements(m, [], ["nox", "helion==1.5.1"])
    assert wanted == ["liger-kernel==0.8.5", "helion==1.5.1", "nox"] and indexes == []
    with pytest.raises(UsageError, match="--toolchain gpu: not a toolchain of carry; its toolchains: host, bare"):
        wheels.requirements(m, ["gpu"], [])
    with pytest.raises(UsageError, match="nothing to bring"):
        wheels.requirements(m, ["bare"], [])


RESOLVED = {  # pip's resolution for a Linux host, as its report gives it (name -> metadata)
    "liger-kernel": {"name": "liger_kernel", "version": "0.8.5",
                     "requires_dist": ["torch>=2.1.2", "triton>=2.3.1", 'cuda-tile>=1.5.0; extra == "cutile"']},
    "torch": {"name": "torch", "version": "2.7.1", "requires_dist": ["filelock", "sympy>=1.13.3",
                                                                     "nvidia-cublas-cu12==12.6.4.1"]},
    "triton": {"name": "triton", "version": "3.3.1", "requires_dist": ["setuptools>=40.8.0"]},
    "sympy": {"name": "sympy", "version": "1.14.0", "requires_dist": ["mpmath<1.4,>=1.1.0"]},
    "mpmath": {"name": "mpmath", "version": "1.3.0"},
    "nvidia-cublas-cu12": {"name": "nvidia-cublas-cu12", "version": "12.6.4.1"},
    "setuptools": {"name": "setuptools", "version": "84.2.1"},
    "filelock": {"name": "filelock", "version": "4.3.2"},
    "nox": {"name": "nox", "version": "2026.10.20", "requires_dist": ["filelock>=3", 'colorama; sys_platform == "win32"',
                                                                       "Colorlog<7,>=6.6"]},
    "colorlog": {"name": "colorlog", "version": "6.12.0"},
    "colorama": {"name": "colorama", "version": "0.4.6"},
}


def test_a_resolution_leaves_the_hosts_packages_and_what_only_they_need():
    kept, left = wheels.closure(RESOLVED, ["liger-kernel", "nox"], {"torch", "triton"}, "3.12")
    # filelock stays: nox needs it too; colorama is Windows-only; cuda-tile only with an extra asked for
    assert kept == ["colorlog==6.12.0", "filelock==4.3.2", "liger_kernel==0.8.5", "nox==2026.10.20"]
    assert left == ["colorama", "mpmath", "nvidia-cublas-cu12", "setuptools", "sympy", "torch", "triton"]
    asked, _ = wheels.closure(RESOLVED, ["torch"], {"torch", "triton"}, "3.12")
    assert "torch==2.7.1" in asked  # a package asked for by name travels, even one the host is said to have


def fake_wheel(folder, name: str, files: dict[str, bytes]):
    path = folder / name
    with zipfile.ZipFile(path, "w") as z:
        for member, data in files.items():
            z.writestr(member, data)
    return path


def test_wheels_packed_unpacked_and_zipped_again_hold_the_same_files(tmp_path):
    (tmp_path / "in").mkdir()
    files = {"pkg/__init__.py": b"X = 1\n", "pkg-1.0.dist-info/METADATA": b"Name: pkg\nVersion: 1.0\n"}
    wheel = fake_wheel(tmp_path / "in", "pkg-1.0-py3-none-any.whl", files)
    packed = wheelhouse.pack([wheel], tmp_path / "out" / "w.tar.xz", tmp_path / "staging")
    assert packed.wheels == ["pkg-1.0-py3-none-any.whl"] and packed.unpacked_bytes == sum(map(len, files.values()))
    made = wheelhouse.unpack(packed.archive, tmp_path / "host")
    assert [p.name for p in made] == ["pkg-1.0-py3-none-any.whl"]
    with zipfile.ZipFile(made[0]) as z:
        assert {i: z.read(i) for i in z.namelist()} == files
    assert wheelhouse.unpack(packed.archive, tmp_path / "host") == made  # again: the wheels are kept


def test_an_archive_member_leaving_its_folder_is_refused(tmp_path):
    archive = tmp_path / "evil.tar.xz"
    with tarfile.open(archive, "w:xz") as tar:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    assert wheelhouse.main([str(archive), str(tmp_path / "host")]) == 2
    assert not (tmp_path / "host" / "escaped.txt").exists() and not (tmp_path / "escaped.txt").exists()
    assert wheelhouse.main([str(tmp_path / "missing.tar.xz"), str(tmp_path / "host")]) == 2
