"""The CUTLASS toolchain lives in opmatrix.kit.cutlass, shared by backends/cutlass.py and kernels/gemm_relu/cutlass.py,
so a kernels folder copied anywhere builds without reaching into a fixed backends folder.

These tests need no nvcc: a stand-in `nvcc` (a shell script that builds a C stub exporting the .cu file's entry
points with the host's cc, or writes a cubin and ptxas' report) and a stand-in CUTLASS tree take their places, so
the toolchain's own logic runs anywhere: discovery, the cached builds, ctypes loading, `compile_for` returning
Compiled through the worker. The real nvcc and CUTLASS build: tests/cells/test_compile_only_hopper.py."""
import json
import shutil
import stat
import textwrap

import pytest

from opmatrix.core.jobs import DeviceInfo, Mode
from opmatrix.kit import cutlass, ptxas
from tests.helpers import copy_plugins, job_row

STUB = r"""
int opmatrix_gemm_relu_f16(int m, int n, int k, void *a, void *b, void *c, void *s, char *e, int l) { return 1; }
int opmatrix_gemm_relu_bf16(int m, int n, int k, void *a, void *b, void *c, void *s, char *e, int l) { return 1; }
int opmatrix_cutlass_stages_f16(void) { return 4; }
int opmatrix_cutlass_stages_bf16(void) { return 4; }
const char *opmatrix_cutlass_config(void) { return "stub kernel"; }
"""
NVCC = """\
#!/bin/sh
# stand-in nvcc: --version; "--cubin -o OUT ..." -> a device-code file and ptxas' -v report on stderr; else
# "-o OUT ... SOURCE" -> a shared library of the stub (counts its builds)
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release 13.0, V13.0.88"; exit 0; fi
cubin=0
while [ $# -gt 0 ]; do
  if [ "$1" = "-o" ]; then out="$2"; shift; fi
  if [ "$1" = "--cubin" ]; then cubin=1; fi
  shift
done
echo build >> "{log}"
if [ $cubin = 1 ]; then
  printf 'cubin' > "$out"
  echo "ptxas info    : Used 168 registers, used 2 barriers" >&2
  echo "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" >&2
  exit 0
fi
exec cc -shared -fPIC -o "$out" "{stub}"
"""


@pytest.fixture
def toolchain(tmp_path, monkeypatch):
    root = tmp_path / "cutlass"
    (root / "include" / "cutlass").mkdir(parents=True)
    (root / "include" / "cutlass" / "version.h").write_text(
        "#define CUTLASS_MAJOR 4\n#define CUTLASS_MINOR 2\n#define CUTLASS_PATCH 1\n")
    (tmp_path / "stub.c").write_text(STUB)
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text(textwrap.dedent(NVCC).format(log=tmp_path / "builds.log", stub=tmp_path / "stub.c"))
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CUDACXX", str(nvcc))
    monkeypatch.setenv("CUTLASS_DIR", str(root))
    monkeypatch.setenv(cutlass.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path


@pytest.mark.skipif(shutil.which("cc") is None, reason="the stand-in nvcc needs a C compiler")
def test_a_library_is_built_once_and_reused_from_the_cache(toolchain):
    source = toolchain / "k.cu"
    source.write_text("// kernel\n")
    first, built = cutlass.build_shared_library(source, ["-O3"])
    again, rebuilt = cutlass.build_shared_library(source, ["-O3"])
    assert built and not rebuilt and first == again and first.parent == toolchain / "cache"
    assert (toolchain / "builds.log").read_text().count("build") == 1
    other, _ = cutlass.build_shared_library(source, ["-O2"])  # other flags: another library
    assert other != first
    assert cutlass.describe() == "CUTLASS 4.2.1 (CUTLASS_DIR), nvcc 13.0"


def test_a_cubin_keeps_ptxas_report_with_it_in_the_cache(toolchain):
    source = toolchain / "k.cu"
    source.write_text("// kernel\n")
    first, built, report = cutlass.build_cubin(source, ["-O3"])
    again, rebuilt, cached = cutlass.build_cubin(source, ["-O3"])
    assert built and not rebuilt and first == again and first.suffix == ".cubin"
    assert cached == report and ptxas.resources(cached) == {"registers": 168, "spill_bytes": 0}
    assert ptxas.resources("no kernel here") == {}


@pytest.mark.skipif(shutil.which("cc") is None, reason="the stand-in nvcc needs a C compiler")
def test_compile_only_builds_through_a_copied_kernels_folder(toolchain):
    """No host has the sm_90: the worker builds the sm_90a device code here and never runs it (status compiles)."""
    root = toolchain / "plugins"
    copy_plugins(root, "gemm_relu", ["spec.py", "cutlass.py", "cutlass_gemm_relu.cu"], ["cutlass"])
    row = job_row(root, "cutlass", kernel="gemm_relu", workload="square_4096", dtype="float16",
                     mode=Mode.COMPILE, device=DeviceInfo("h200", "nvidia", "sm_90", "H200"))
    assert row.status == "compiles", row.error
    assert "sm_90a cubin" in row.error and "CUTLASS 4.2.1" in row.error
    assert "), 168 registers, no spills" in row.error  # ptxas' report, worded as every compile-only row words it
    config = json.loads(row.config)
    assert config["registers"] == 168 and config["spill_bytes"] == 0 and config["arch"] == "sm_90a"
    assert row.backend_version == "CUTLASS 4.2.1 (CUTLASS_DIR), nvcc 13.0"


def test_a_ptxas_report_reads_as_registers_and_spills():
    report = ("ptxas info    : Function properties for k\n    0 bytes stack frame, 8 bytes spill stores, 4 bytes "
              "spill loads\nptxas info    : Used 168 registers, used 4 barriers")
    assert ptxas.resources(report) == {"registers": 168, "spill_bytes": 12}
    assert ptxas.text(ptxas.resources(report)) == ", 168 registers, 12 bytes spilled"
    assert ptxas.text({"registers": 90, "spill_bytes": 0}) == ", 90 registers, no spills" and ptxas.text({}) == ""


def test_a_ptxas_report_says_when_ptxas_serialised_the_wgmmas():
    # ptxas 13.0's words for sm_90a, when a kernel reads a wgmma's accumulators before the wait it could have
    # overlapped (seen with an unpeeled FA3 loop: kernels/flash_attention/tilelang.py)
    report = ("ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
              "non wgmma instructions reading accumulator registers of  a wgmma between start and end of the "
              "pipeline stage in the function 'attention_kernel'\nptxas info    : Function properties for "
              "attention_kernel\n    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
              "ptxas info    : Used 168 registers, used 1 barriers, 1024 bytes smem")
    assert ptxas.resources(report) == {"registers": 168, "spill_bytes": 0, "wgmma_serialized": True}
    assert ptxas.text(ptxas.resources(report)) == ", 168 registers, no spills, wgmma serialised by ptxas (C7514)"
