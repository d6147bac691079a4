"""AMD GPU code objects built on any host, GPU or not, for a compile-only row (`compiles`), from HIP source a tile
DSL generated (TileLang's): the distribution's LLVM compiles it, and the row says what a reader can check.

- The compiler: LLVM 22 from the distribution (Debian 12: `clang-22`, `lld-22` and `llvm-22` from bookworm-security,
  `.ci/run` installs them; elsewhere apt.llvm.org's packages of the same names), which targets CDNA (gfx90a, gfx942,
  gfx950) itself: no ROCm installation.
- HIP's runtime headers and the `ocml` / `ockl` device bitcode: the copies Triton's wheel carries
  (triton/backends/amd/include and lib), found without importing Triton.
- What neither has, written here at each build into a folder of its own: the `oclc_*` control constants the device
  libraries read (the ISA version, code object ABI 5, wave64, IEEE math; each one constant, as ROCm's `oclc_*.bc`
  files are), and small headers for what TileLang's HIP templates include beyond HIP's runtime headers:
  `hip/hip_bf16.h` (`hip_bfloat16`: 16 bits, round-to-nearest-even from float), `hip/hip_fp16.h` (`half2`, two
  `_Float16`: the templates use `_Float16` for half itself), `hip/amd_detail/amd_hip_fp8.h` (the fp8 types as
  storage only: their conversions are declared, not defined, so a kernel that converts fp8 fails to link, naming
  the function) and an empty `rocwmma/rocwmma.hpp` (included, not used).
- The row's LDS is the compiler's static LDS plus the dynamic LDS the DSL launches the kernel with; where that is
  more than a workgroup of the arch may have (64 KiB on gfx90a and gfx942, 160 KiB on gfx950), the object is
  built and the row says it would not launch.

`missing()` says in one line what is not here and how to get it (the row then stays `lowers`); `build(source, arch,
includes)` compiles and reads the code object back: its size, its MFMA instructions (llvm-objdump's disassembly) and
the compiler's resource report of the same compile (`-Rpass-analysis=kernel-resource-usage`: VGPRs, AGPRs, SGPRs,
LDS, scratch, spills, occupancy). Stdlib only.
"""
from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

LLVM = 22  # the LLVM release whose clang, lld and llvm-objdump build and read the code objects
PACKAGES = f"clang-{LLVM} lld-{LLVM} llvm-{LLVM}"
INSTALL = (f"apt-get install --no-install-recommends {PACKAGES} (Debian 12: bookworm-security; elsewhere "
           "apt.llvm.org)")
_TIMEOUT_S = 600

# The device libraries' control constants (ROCm ships each as an oclc_*.bc file of one constant): wave64 (CDNA),
# code object ABI 5, IEEE math (no unsafe or finite-only math, correctly rounded fp32 sqrt), no flushing to zero.
_CONTROLS = (("__oclc_ABI_version", "i32", 500, 4), ("__oclc_wavefrontsize64", "i8", 1, 1),
             ("__oclc_wavefrontsize_log2", "i32", 6, 4), ("__oclc_unsafe_math_opt", "i8", 0, 1),
             ("__oclc_finite_only_opt", "i8", 0, 1), ("__oclc_correctly_rounded_sqrt32", "i8", 1, 1),
             ("__oclc_daz_opt", "i8", 0, 1))

_HEADERS = {
    "hip/hip_bf16.h": r"""#pragma once
// opmatrix's own hip_bfloat16 (HIP's is not among the headers Triton's wheel carries): 16 bits of storage,
// round-to-nearest-even from float (NaN stays NaN), arithmetic and comparisons through float.
#include <hip/hip_runtime.h>
struct hip_bfloat16 {
  unsigned short data;
  hip_bfloat16() = default;
  __host__ __device__ explicit hip_bfloat16(float f) : data(round(f)) {}
  __host__ __device__ hip_bfloat16 &operator=(float f) { data = round(f); return *this; }
  __host__ __device__ operator float() const {
    return __builtin_bit_cast(float, static_cast<unsigned int>(data) << 16);
  }
  __host__ __device__ static unsigned short round(float f) {
    unsigned int bits = __builtin_bit_cast(unsigned int, f);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((bits >> 16) | 0x40u);
    return static_cast<unsigned short>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
  }
};
#define OPMATRIX_BF16_OP(op)                                                                          \
  __host__ __device__ inline hip_bfloat16 operator op(hip_bfloat16 a, hip_bfloat16 b) {              \
    return hip_bfloat16(float(a) op float(b));                                                       \
  }                                                                                                 \
  __host__ __device__ inline hip_bfloat16 &operator op##=(hip_bfloat16 &a, hip_bfloat16 b) {         \
    return a = hip_bfloat16(float(a) op float(b));                                                   \
  }
OPMATRIX_BF16_OP(+)
OPMATRIX_BF16_OP(-)
OPMATRIX_BF16_OP(*)
OPMATRIX_BF16_OP(/)
#undef OPMATRIX_BF16_OP
__host__ __device__ inline hip_bfloat16 operator-(hip_bfloat16 a) { a.data ^= 0x8000u; return a; }
__host__ __device__ inline bool operator<(hip_bfloat16 a, hip_bfloat16 b) { return float(a) < float(b); }
__host__ __device__ inline bool operator>(hip_bfloat16 a, hip_bfloat16 b) { return float(a) > float(b); }
__host__ __device__ inline bool operator<=(hip_bfloat16 a, hip_bfloat16 b) { return float(a) <= float(b); }
__host__ __device__ inline bool operator>=(hip_bfloat16 a, hip_bfloat16 b) { return float(a) >= float(b); }
__host__ __device__ inline bool operator==(hip_bfloat16 a, hip_bfloat16 b) { return float(a) == float(b); }
__host__ __device__ inline bool operator!=(hip_bfloat16 a, hip_bfloat16 b) { return float(a) != float(b); }
""",
    "hip/hip_fp16.h": "#pragma once\n"
    "// opmatrix: of HIP's fp16 types, TileLang's templates use _Float16 itself and its generated code half2 alone,\n"
    "// two halves side by side whose x and y it converts to float or addresses as _Float16.\n"
    "struct __attribute__((aligned(4))) __half2 { _Float16 x, y; };\n"
    "typedef __half2 half2;\n",
    "rocwmma/rocwmma.hpp": "#pragma once\n// opmatrix: included by TileLang's HIP templates, none of it used.\n",
    "hip/amd_detail/amd_hip_fp8.h": "#pragma once\n"
    "// opmatrix: HIP's fp8 types as storage only, for TileLang's hip_fp8.h to parse. Their conversions are declared\n"
    "// and never defined: a kernel that converts fp8 fails to link, naming the function.\n"
    "typedef unsigned char __hip_fp8_storage_t;\n"
    "typedef unsigned short __hip_fp8x2_storage_t;\n"
    "typedef unsigned int __hip_fp8x4_storage_t;\n"
    "enum __hip_saturation_t { __HIP_NOSAT, __HIP_SATFINITE };\n"
    "enum __hip_fp8_interpretation_t { __HIP_E4M3_FNUZ, __HIP_E5M2_FNUZ, __HIP_E4M3, __HIP_E5M2 };\n"
    "__device__ __hip_fp8_storage_t __hip_cvt_float_to_fp8(float, __hip_saturation_t, __hip_fp8_interpretation_t);\n"
    + "".join(f"struct __hip_fp8_{kind} {{ __hip_fp8_storage_t __x; __device__ operator float() const; }};\n"
              f"struct __hip_fp8x2_{kind} {{ __hip_fp8x2_storage_t __x; }};\n"
              f"struct __hip_fp8x4_{kind} {{ __hip_fp8x4_storage_t __x; }};\n"
              for kind in ("e4m3", "e4m3_fnuz", "e5m2", "e5m2_fnuz")),
}

# clang's -Rpass-analysis=kernel-resource-usage remarks, one block per kernel: "remark:     VGPRs: 245 [...]"
_REMARK = re.compile(r"remark:\s+([A-Za-z][A-Za-z /\[\]]*?):\s+(\d+)\s+\[-Rpass-analysis=kernel-resource-usage\]")
_FIELDS = {"VGPRs": "vgprs", "AGPRs": "agprs", "TotalSGPRs": "sgprs", "ScratchSize [bytes/lane]": "scratch_bytes",
           "Occupancy [waves/SIMD]": "occupancy", "VGPRs Spill": "vgpr_spills", "SGPRs Spill": "sgpr_spills",
           "LDS Size [bytes/block]": "lds_bytes"}
_MFMA = re.compile(r"^\s*v_mfma_\w+", re.MULTILINE)
# LDS a workgroup may have (CDNA2 and CDNA3: 64 KiB per CU; CDNA4: 160 KiB): more is built, and cannot launch
LDS_LIMIT = {"gfx908": 65536, "gfx90a": 65536, "gfx940": 65536, "gfx941": 65536, "gfx942": 65536, "gfx950": 163840}


def _tool(name: str) -> str | None:
    return shutil.which(f"{name}-{LLVM}")


def _triton_amd() -> Path | None:
    """triton/backends/amd of the Triton this environment would import (not imported), or None."""
    spec = importlib.util.find_spec("triton")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        amd = Path(folder) / "backends" / "amd"
        if (amd / "include" / "hip" / "hip_runtime.h").is_file() and (amd / "lib" / "ocml.bc").is_file():
            return amd
    return None


def missing() -> str | None:
    """What this host lacks to build an AMD code object, in one line with how to get it; None when nothing."""
    absent = [f"{name}-{LLVM}" for name in ("clang", "ld.lld", "llvm-objdump") if _tool(name) is None]
    if absent:
        return f"no {', '.join(absent)} here for a code object: {INSTALL}"
    if _triton_amd() is None:
        return ("no HIP headers and ocml/ockl device libraries for a code object: they come with Triton's wheel "
                "(pip install triton into the cell)")
    return None


def isa_version(arch: str) -> int:
    """The device libraries' __oclc_ISA_version of a gfx arch: major x 1000 + minor x 100 + stepping, the last two
    being its last two (hexadecimal) digits: gfx942 -> 9402, gfx90a -> 9010."""
    digits = arch.removeprefix("gfx")
    return int(digits[:-2]) * 1000 + int(digits[-2], 16) * 100 + int(digits[-1], 16)


def _controls(arch: str) -> str:
    """The control constants of `arch` as an LLVM IR module (linkonce_odr, as ROCm's oclc_*.bc define them)."""
    lines = ['target triple = "amdgcn-amd-amdhsa"']
    for name, kind, value, align in (("__oclc_ISA_version", "i32", isa_version(arch), 4),) + _CONTROLS:
        lines.append(f"@{name} = linkonce_odr protected local_unnamed_addr addrspace(4) constant {kind} {value}, "
                     f"align {align}")
    return "\n".join(lines) + "\n"


def _run(command: list[str], what: str) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, timeout=_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {done.returncode}): {' '.join(command)}\n{done.stderr[-6000:]}")
    return done


def version() -> str:
    """'clang 22.1.8': the compiler's own version line."""
    out = _run([_tool("clang"), "--version"], "clang --version").stdout
    found = re.search(r"clang version (\S+)", out)
    return f"clang {found.group(1) if found else LLVM}"


def resources(report: str) -> dict:
    """The compiler's resource report (clang's kernel-resource-usage remarks) as numbers, the most of any kernel:
    {"vgprs", "agprs", "sgprs", "lds_bytes", "scratch_bytes", "vgpr_spills", "sgpr_spills", "occupancy"} (occupancy:
    the fewest waves per SIMD); a field the report gives as an expression (a call left unresolved) is left out."""
    found: dict[str, int] = {}
    for field, value in _REMARK.findall(report):
        key = _FIELDS.get(field.strip())
        if key is not None:
            found[key] = min(found.get(key, int(value)), int(value)) if key == "occupancy" else max(
                found.get(key, 0), int(value))
    return found


def text(facts: dict) -> str:
    """' using MFMA (128 v_mfma), 245 VGPRs, 0 AGPRs, 80 SGPRs, 49152 bytes of LDS, no spills, occupancy 2
    waves/SIMD': for a row's description; "" for no facts."""
    using = f" using MFMA ({facts['mfma']} v_mfma)" if facts.get("mfma") else ""
    parts = [f"{facts[key]} {name}" for key, name in (("vgprs", "VGPRs"), ("agprs", "AGPRs"), ("sgprs", "SGPRs"))
              if key in facts]
    if "lds_bytes" in facts:
        limit = facts.get("lds_limit_bytes")
        over = (f" (over the {limit} a workgroup may have: it would not launch)"
                if limit and facts["lds_bytes"] > limit else "")
        parts.append(f"{facts['lds_bytes']} bytes of LDS{over}")
    spills = [f"{facts[key]} {name}" for key, name in (("vgpr_spills", "VGPRs"), ("sgpr_spills", "SGPRs"))
              if facts.get(key)]
    if "vgpr_spills" in facts or "sgpr_spills" in facts:
        parts.append(f"{' and '.join(spills)} spilled" if spills else "no spills")
    if facts.get("scratch_bytes"):
        parts.append(f"{facts['scratch_bytes']} bytes of scratch per lane")
    if "occupancy" in facts:
        parts.append(f"occupancy {facts['occupancy']} waves/SIMD")
    return using + "".join(f", {part}" for part in parts)


def build(source: str, arch: str, includes: list[str], lds_bytes: int = 0) -> tuple[str, dict]:
    """Compile HIP `source` to a code object for `arch` (wave64 CDNA: gfx90a, gfx942, gfx950) with `includes` on
    the include path (the DSL's own templates), then read it back. `lds_bytes`: the dynamic LDS the DSL launches the
    kernel with, added to the static LDS the compiler reports. Returns the text of a compiles row, "gfx942 code
    object by clang 22.1.8 using MFMA (128 v_mfma), 245 VGPRs, ... (32328 bytes)", and the facts for its config:
    code_object_bytes, mfma (v_mfma instructions in the disassembly), the resource report's fields, compiler, and
    lds_limit_bytes (the LDS a workgroup of `arch` may have: the text says when the kernel asks for more).
    Raises RuntimeError with the compiler's message when it fails, or when missing() names something."""
    absent = missing()
    if absent:
        raise RuntimeError(absent)
    if not arch.startswith("gfx9"):
        raise RuntimeError(f"{arch}: opmatrix builds AMD code objects for wave64 CDNA GPUs (gfx9xx) only")
    clang, amd = _tool("clang"), _triton_amd()
    with tempfile.TemporaryDirectory(prefix="opmatrix-amdgcn-") as folder:
        root = Path(folder)
        for name, content in _HEADERS.items():
            (root / "include" / name).parent.mkdir(parents=True, exist_ok=True)
            (root / "include" / name).write_text(content)
        (root / "controls.ll").write_text(_controls(arch))
        _run([clang, "-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}", "-nogpulib", "-c", "-emit-llvm", "-x", "ir",
              str(root / "controls.ll"), "-o", str(root / "controls.bc")], "the oclc control constants' bitcode")
        (root / "kernel.cpp").write_text(source)
        resource_dir = _run([clang, "-print-resource-dir"], "clang -print-resource-dir").stdout.strip()
        libraries = [amd / "lib" / "ocml.bc", amd / "lib" / "ockl.bc", root / "controls.bc"]
        command = [clang, "-x", "hip", f"--offload-arch={arch}", "--offload-device-only", "--no-gpu-bundle-output",
                   "-c", "-O3", "-std=c++17", "-nogpuinc", "-nogpulib", "-mcode-object-version=5",
                   "-D__AMDGCN_WAVEFRONT_SIZE=64", "-isystem", f"{resource_dir}/include/cuda_wrappers",
                   "-include", "__clang_hip_runtime_wrapper.h", "-I", str(root / "include"),
                   "-I", str(amd / "include"), *(f"-I{folder}" for folder in includes),
                   *(arg for library in libraries for arg in ("-Xclang", "-mlink-builtin-bitcode", "-Xclang",
                                                               str(library))),
                   "-Rpass-analysis=kernel-resource-usage", str(root / "kernel.cpp"), "-o", str(root / "kernel.hsaco")]
        report = _run(command, f"clang-{LLVM} (HIP for {arch})").stderr
        binary = (root / "kernel.hsaco").read_bytes()
        disassembly = _run([_tool("llvm-objdump"), "-d", str(root / "kernel.hsaco")], "llvm-objdump -d").stdout
    facts = dict(resources(report), code_object_bytes=len(binary), mfma=len(_MFMA.findall(disassembly)),
                 compiler=version())
    facts["lds_bytes"] = facts.get("lds_bytes", 0) + lds_bytes
    if arch in LDS_LIMIT:
        facts["lds_limit_bytes"] = LDS_LIMIT[arch]
    return f"{arch} code object by {facts['compiler']}{text(facts)} ({len(binary)} bytes)", facts
