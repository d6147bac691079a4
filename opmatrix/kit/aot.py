"""Builds for a device, above all compile-only ones: answer "does it even build for that device?" where no host has
it.

Used from `compile_for` in kernels/<op>/<backend>.py: the `*_compile_for` helpers return what `compile_for` returns,
a `Compiled(status="compiles" | "lowers", what=<what was built>, config={...})`. The device facts that `build` and
`compile_for` both need live here too: the TileLang target, the SM count (this GPU's, or the arch's when it is
absent), and the refusal of a variant whose instructions the device lacks. Framework imports stay inside the
functions: the engine imports this module without TileLang or Triton.
"""
from __future__ import annotations

import contextlib
import io
import logging
import shutil

from opmatrix.incell.plugins import Compiled, Unsupported
from opmatrix.kit import amdgcn, ptxas, scoped_env

FLOAT_ARGS = ("eps", "scale")  # scalar kernel arguments passed as Python floats (rmsnorm's eps, attention's scale)


def tilelang_target(device) -> dict:
    """CUDA with the 'a' features on Hopper/Blackwell (wgmma, setmaxnreg need sm_90a), or HIP by gfx arch."""
    if device.vendor == "nvidia":
        return {"kind": "cuda", "arch": device.arch + ("a" if device.arch in ("sm_90", "sm_100") else "")}
    if device.vendor == "amd":
        return {"kind": "hip", "mcpu": device.arch}
    raise Unsupported("compile-only builds are for GPUs")


def tilelang_gpu_build(device, op: str, make_config, make_func):
    """The build of a GPU-only TileLang implementation. A CPU device is refused first, so every such implementation
    says the same thing in the coverage grid; then `make_config()` (the kernel's configuration for this workload;
    it may refuse the shape) and `make_func(config)` (its prim_func), compiled for this device's target. Returns
    the compiled kernel and the config record with the target in it."""
    import tilelang

    if not device.is_gpu:
        raise Unsupported(f"no CPU implementation of {op} in TileLang (the GPU kernel has no CPU lowering)")
    config = make_config()
    target = tilelang_target(device)
    return tilelang.compile(make_func(config), target=target), dict(config, target=target)


_SM_COUNT = {"sm_90": 132}  # compile-only builds: grids sized by SMs are sized for the arch's part (H100/H200)


def known_sm_count(device) -> int:
    """The SM count of the device's arch, for compile-only builds where no such device is here."""
    return _SM_COUNT.get(device.arch, 132)


def sm_count(device) -> int:
    """The SMs of the GPU this process runs on, or for a compile-only build the arch's (known_sm_count)."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return known_sm_count(device)


def cuda_capability(arch: str) -> int:
    """An NVIDIA arch's compute capability as one number: sm_90 and sm_90a -> 90."""
    return int(arch.removeprefix("sm_").rstrip("a"))


def require_bulk_l2_prefetch(device, variant: str) -> None:
    """Refuse a variant that asks the TMA unit for bulk L2 prefetches (cp.async.bulk.prefetch.L2: NVIDIA sm_90 and
    later) on any other device, naming `default` as the portable kernel."""
    if not (device.vendor == "nvidia" and device.arch.startswith("sm_") and cuda_capability(device.arch) >= 90):
        raise Unsupported(f"`{variant}` asks the TMA unit for a bulk L2 prefetch (cp.async.bulk, sm_90 and later); "
                          "`default` is the portable kernel")


def tilelang_row_threads(row: int) -> int:
    """Threads for a kernel that holds one row of `row` elements per block: the most (up to 256) that split the
    row evenly, since TileLang's layout inference needs an even split."""
    for threads in (256, 128, 64, 32):
        if row % threads == 0:
            return threads
    raise Unsupported(f"a row of {row} elements is not a multiple of 32, which this kernel's row layout needs")


# What the generated CUDA shows, named in a compiles row: TMA copies, warp specialisation's register split
_HOPPER_FEATURES = (("TMA loads", "tl::tma_load("), ("TMA stores", "tl::tma_store("),
                    ("setmaxnreg", "warpgroup_reg_alloc"))


def tilelang_compile_for(func, device, config: dict, pass_configs: dict | None = None) -> Compiled:
    """A binary where the device's compiler is here (nvcc; for AMD the distribution's clang, opmatrix.kit.amdgcn,
    else hipcc), else the device source (lowers, saying what is missing). `pass_configs` as the implementation's own
    build passes them (e.g. fast math)."""
    import tilelang

    target = tilelang_target(device)
    config = dict(config, target=target)
    absent = amdgcn.missing() if device.vendor == "amd" else None
    if device.vendor == "amd" and (absent is None or not shutil.which("hipcc")):
        return _tilelang_code_object(func, device, target, config, pass_configs, absent)
    with _tilelang_ptxas_report() as report:
        source = str(tilelang.compile(func, target=target, execution_backend="tvm_ffi",
                                      pass_configs=pass_configs).get_kernel_source())
    mma = " using wgmma" if "wgmma" in source else ""
    features = "".join(f", {name}" for name, marker in _HOPPER_FEATURES if marker in source)
    arch = target.get("arch", target.get("mcpu"))
    resources = ptxas.text(ptxas.resources("\n".join(report)))
    return Compiled("compiles", f"{arch} binary{mma}{features}{resources} ({len(source)}-char source)", config)


def _tilelang_code_object(func, device, target: dict, config: dict, pass_configs: dict | None,
                          absent: str | None) -> Compiled:
    """TileLang's HIP source for an AMD GPU, lowered as its own build lowers it, and compiled by opmatrix.kit.amdgcn
    into a code object (compiles: its size, MFMA instructions and the compiler's resource report in the row and its
    config), or, where `absent` names what this host lacks, the source alone (lowers, saying what is missing)."""
    import tilelang
    from tilelang.env import TILELANG_TEMPLATE_PATH
    from tilelang.transform.pass_config import normalize_pass_configs
    from tvm import transform
    from tvm.target import Target

    with transform.PassContext(opt_level=3, config=normalize_pass_configs(pass_configs)), Target(target):
        artifact = tilelang.lower(func, target=Target(target), enable_device_compile=False)
    source = str(artifact.kernel_source)
    if absent:
        return Compiled("lowers", f"HIP source for {device.arch} ({len(source)} chars); {absent}", config)
    # TileLang launches its kernels with their shared memory as dynamic LDS, which the compiler's report leaves out
    dynamic = max((int(f.attrs.get("dyn_shared_memory_buf", 0)) for f in artifact.device_mod.functions.values()
                   if f.attrs is not None), default=0)
    what, facts = amdgcn.build(source, device.arch, [TILELANG_TEMPLATE_PATH], lds_bytes=dynamic)
    return Compiled("compiles", what, dict(config, **facts))


@contextlib.contextmanager
def _tilelang_ptxas_report():
    """The lines TileLang logs while it compiles, with TILELANG_VERBOSE on: they hold ptxas' -v report of the
    kernel (registers, spills), from the very nvcc run that builds it. Empty when the binary came from TileLang's
    cache (no nvcc ran)."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger, handler = logging.getLogger("tilelang"), Collect(logging.INFO)
    level = logger.level
    with scoped_env.variable(_VERBOSE, "1"):
        logger.addHandler(handler)
        logger.setLevel(min(level or logging.INFO, logging.INFO))
        try:
            yield lines
        finally:
            logger.setLevel(level)
            logger.removeHandler(handler)


_VERBOSE = "TILELANG_VERBOSE"  # TileLang 0.1.15: adds --ptxas-options=--verbose and logs nvcc's output


def triton_compile_for(kernel, dtype: str, constexprs: dict, options: dict, device) -> Compiled:
    """Ahead-of-time Triton compile for the device (CUDA cubin or AMD hsaco); needs no GPU and no ROCm.
    Pointer arguments (names ending in _ptr) get the dtype, FLOAT_ARGS fp32, the rest i32."""
    elem = {"float16": "*fp16", "bfloat16": "*bf16", "float32": "*fp32"}[dtype]
    signature = {name: ("constexpr" if name in constexprs else elem if name.endswith("_ptr")
                        else "fp32" if name in FLOAT_ARGS else "i32") for name in kernel.arg_names}
    return triton_compile(kernel, signature, constexprs, options, device)


def triton_compile(kernel, signature: dict, constexprs: dict, options: dict, device) -> Compiled:
    """triton_compile_for with the kernel's signature spelt out ({argument: "*fp16" | "fp32" | "i32" |
    "constexpr"}), for a kernel whose argument names do not follow the _ptr convention (a library's own). A Gluon
    kernel (`@gluon.jit`) compiles from its own AST source, the rest as Triton."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    if getattr(kernel, "is_gluon", lambda: False)():
        from triton.experimental.gluon._runtime import GluonASTSource as ASTSource

    if not device.is_gpu:
        raise Unsupported("compile-only builds are for GPUs")
    if device.vendor == "nvidia":
        target, binary = GPUTarget("cuda", cuda_capability(device.arch), 32), "cubin"
    else:
        target, binary = GPUTarget("hip", device.arch, 64), "hsaco"
    with _triton_ptxas_report(device) as report:
        compiled = triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=constexprs), target=target,
                                  options=options)
    mma = " using wgmma" if "wgmma" in compiled.asm.get("ptx", "") else ""
    resources = ptxas.text(ptxas.resources(report.getvalue()))
    return Compiled("compiles", f"{device.arch} {binary}{mma}{resources} ({len(compiled.asm[binary])} bytes)",
                    dict(constexprs, **options))


@contextlib.contextmanager
def _triton_ptxas_report(device):
    """What Triton prints while it compiles with its knob dump_ptxas_log on: the -v report of the ptxas run that
    builds the cubin (registers, spills). Empty for AMD, and when the cubin came from Triton's cache."""
    report = io.StringIO()
    if device.vendor != "nvidia":
        yield report
        return
    from triton import knobs

    with knobs.nvidia.scope(), contextlib.redirect_stdout(report):
        knobs.nvidia.dump_ptxas_log = True
        yield report
