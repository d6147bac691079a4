"""CUTLASS 3.x/4.x on Hopper: one warp-specialized TMA + wgmma GEMM with relu fused in its epilogue.

cutlass_gemm_relu.cu (beside this file) builds the kernel from CUTLASS's collective builders: tile 128x256x64,
cluster 2x1x1 (two CTAs along M share each B tile by TMA multicast), KernelTmaWarpSpecializedCooperative mainloop
with the stage count CUTLASS derives from the shared memory the epilogue leaves (4 for fp16/bf16), and a
TmaWarpSpecializedCooperative epilogue computing relu(1 * acc) in fp32 with no C operand (LinCombEltAct<ReLu>,
ElementC = void). build() compiles it with nvcc (the compile time) into a cached shared library holding both the
fp16 and the bf16 instance and calls it through ctypes on torch's tensors and current stream. For a device no host
has, compile_for builds the device code alone (a cubin) and reports ptxas' registers and spills.

Coverage: NVIDIA sm_90 only (the sm_90a target: wgmma, TMA, clusters); fp16 and bf16; K and N multiples of 8,
because TMA needs every row stride 16-byte aligned (A's is K, B's and C's is N). M is free: TMA clips the edges.
"""
import ctypes
from pathlib import Path

from opmatrix.kit import Built, Compiled, Unsupported, cutlass, ptxas

_SOURCE = Path(__file__).with_name("cutlass_gemm_relu.cu")
_DEVICE_FLAGS = ["-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "--expt-relaxed-constexpr",
                 "-DNDEBUG", "-DCUTLASS_ENABLE_TENSOR_CORE_MMA=1"]
_FLAGS = [*_DEVICE_FLAGS, "-shared", "-Xcompiler", "-fPIC", "-Xcompiler", "-Wno-deprecated-declarations"]
# nvcc 13's -arch=sm_90a shorthand also runs a generic compute_90 pass (embedded PTX) in which wgmma does not
# exist and the kernel body would compile to nothing; the -gencode form builds the sm_90a machine code alone.
_ALIGNMENT = 8  # elements: 16 bytes of fp16 / bf16
_ENTRY = {"float16": "f16", "bfloat16": "bf16"}
_CONFIG = {"tile_mnk": "128x256x64", "cluster_mnk": "2x1x1", "mainloop": "KernelTmaWarpSpecializedCooperative",
           "epilogue": "TmaWarpSpecializedCooperative, LinCombEltAct<ReLu>, no C", "accumulate": "float32",
           "alignment": _ALIGNMENT, "arch": "sm_90a"}

_libraries: dict[str, ctypes.CDLL] = {}


def _check(workload, dtype, device) -> None:
    """Coverage, decided before anything is compiled or touches a GPU."""
    if device.vendor == "cpu":
        raise Unsupported("CUTLASS kernels run on NVIDIA GPUs only")
    if device.vendor != "nvidia":
        raise Unsupported("CUTLASS is NVIDIA-only; AMD needs CK/hipBLASLt")
    if device.arch != "sm_90":
        raise Unsupported(f"this kernel is written for Hopper (sm_90a: TMA, wgmma, clusters); {device.arch} needs "
                          "its own CUTLASS kernel")
    if dtype not in _ENTRY:
        raise Unsupported(f"instantiated for fp16 and bf16 (wgmma with fp32 accumulation), not {dtype}")
    strides = [("A's row stride K", workload["K"]), ("B's and C's row stride N", workload["N"])]
    bad = [f"{what}={n} elements ({2 * n} bytes)" for what, n in strides if n % _ALIGNMENT]
    if bad:
        raise Unsupported(f"TMA needs 16-byte aligned strides: {' and '.join(bad)} is not a multiple of "
                          f"{_ALIGNMENT} elements (16 bytes)")


def _library() -> tuple[ctypes.CDLL, Path, bool]:
    path, built = cutlass.build_shared_library(_SOURCE, _FLAGS)
    if str(path) not in _libraries:
        lib = ctypes.CDLL(str(path))
        for suffix in _ENTRY.values():
            entry = getattr(lib, f"opmatrix_gemm_relu_{suffix}")
            entry.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
            entry.restype = ctypes.c_int
            getattr(lib, f"opmatrix_cutlass_stages_{suffix}").restype = ctypes.c_int
        lib.opmatrix_cutlass_config.restype = ctypes.c_char_p
        _libraries[str(path)] = lib
    return _libraries[str(path)], path, built


def _config(lib, path: Path, dtype: str) -> dict:
    return dict(_CONFIG, stages=int(getattr(lib, f"opmatrix_cutlass_stages_{_ENTRY[dtype]}")()),
                kernel=lib.opmatrix_cutlass_config().decode(), library=path.name)


def build(workload, dtype, device, variant):
    import torch

    _check(workload, dtype, device)
    lib, path, built = _library()
    entry = getattr(lib, f"opmatrix_gemm_relu_{_ENTRY[dtype]}")
    M, N, K = workload["M"], workload["N"], workload["K"]
    torch_dtype = getattr(torch, dtype)
    err = ctypes.create_string_buffer(1024)

    def gemm_relu(a, b, out):
        for name, t, shape in (("a", a, (M, K)), ("b", b, (K, N)), ("out", out, (M, N))):
            if tuple(t.shape) != shape or t.dtype != torch_dtype or not t.is_contiguous() or not t.is_cuda:
                raise ValueError(f"{name} must be a contiguous {dtype} CUDA tensor of shape {shape}, got "
                                 f"{tuple(t.shape)} {t.dtype} on {t.device} (contiguous={t.is_contiguous()})")
        stream = torch.cuda.current_stream(a.device).cuda_stream
        rc = entry(M, N, K, a.data_ptr(), b.data_ptr(), out.data_ptr(), stream, err, len(err))
        if rc != 0:
            raise RuntimeError(f"CUTLASS gemm_relu returned {rc}: {err.value.decode(errors='replace')}")

    cache = "cold" if built else "warm (library built by an earlier job of this cell)"
    return Built(gemm_relu, _config(lib, path, dtype), cache)


def compile_for(workload, dtype, device, variant):
    """No host has the device: the same source's device code built for sm_90a (a cubin, no host half: nothing built
    here can run there), never run; ptxas' registers and spills from the build."""
    _check(workload, dtype, device)
    cubin, _, report = cutlass.build_cubin(_SOURCE, _DEVICE_FLAGS)
    resources = ptxas.resources(report)
    root = cutlass.toolchain()[1]
    return Compiled("compiles", f"sm_90a cubin ({cubin.stat().st_size} bytes, CUTLASS {cutlass.cutlass_version(root)})"
                                f"{ptxas.text(resources)}", dict(_CONFIG, **resources, cubin=cubin.name))
