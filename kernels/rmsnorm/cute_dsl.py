"""CuTe DSL: one CTA per row of `_THREADS` threads; each thread walks the row in strides of the CTA (coalesced loads),
squares and sums in fp32, the sums meet by warp shuffles (cute.arch.warp_reduction_sum) and one shared-memory slot
per warp (written by all of the warp's lanes: cute.arch.warp_idx() is a full-warp shuffle, so it must not sit in a
lane-0 branch), then each thread scales its elements. Plain SIMT, written from CuTe DSL's primitives (no copy atoms, no
vectorised or TMA loads, no clusters: quack's RMSNorm, a library contestant, is the tuned CuTe DSL kernel to compare
with). NVIDIA only; compile-only builds for sm_90a / sm_100a over fake tensors (opmatrix.kit.cute_dsl)."""
import functools

from opmatrix.kit import Built, cute_dsl, load_spec

spec = load_spec(__file__)
_THREADS = 256
_WARPS = _THREADS // 32


@functools.cache
def _kernel():
    """The @cute.jit launcher and its @cute.kernel, made when first wanted: CuTe DSL is imported only then, so this
    file loads (and passes its contract check) where it is not installed."""
    import cutlass
    import cutlass.cute as cute

    @cute.kernel
    def _rmsnorm_kernel(x: cute.Tensor, w: cute.Tensor, y: cute.Tensor, eps: cutlass.Float32,
                        hidden: cutlass.Constexpr[int]):
        tidx, _, _ = cute.arch.thread_idx()
        row, _, _ = cute.arch.block_idx()
        smem = cutlass.utils.SmemAllocator()
        partial = smem.allocate_tensor(cutlass.Float32, cute.make_layout(_WARPS), byte_alignment=16)
        total = cutlass.Float32(0.0)
        for i in cutlass.range(tidx, hidden, _THREADS):
            v = x[row, i].to(cutlass.Float32)
            total = total + v * v
        total = cute.arch.warp_reduction_sum(total)
        # every lane stores its warp's sum (the butterfly left it in all 32): warp_idx() is a full-warp
        # shfl.sync, which hung the GPU when only lane 0 reached it inside `if lane_idx() == 0`
        partial[cute.arch.warp_idx()] = total
        cute.arch.barrier()
        total = cutlass.Float32(0.0)
        for j in cutlass.range_constexpr(_WARPS):
            total = total + partial[j]
        scale = cute.math.rsqrt(total / hidden + eps)
        for i in cutlass.range(tidx, hidden, _THREADS):
            y[row, i] = (x[row, i].to(cutlass.Float32) * scale * w[i].to(cutlass.Float32)).to(y.element_type)

    @cute.jit
    def _rmsnorm(x: cute.Tensor, w: cute.Tensor, y: cute.Tensor, eps: cutlass.Float32, hidden: cutlass.Constexpr[int],
                 stream):
        _rmsnorm_kernel(x, w, y, eps, hidden).launch(grid=[x.shape[0], 1, 1], block=[_THREADS, 1, 1], stream=stream)

    return _rmsnorm


def _signature(workload, dtype) -> tuple:
    """Fake tensors for x, w, y (any number of rows, this hidden size), eps, hidden, and torch's current stream."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

    hidden, dt = workload["hidden"], cute_dsl.dtype(dtype)
    rows = cute.sym_int()
    x, y = (make_fake_compact_tensor(dt, (rows, hidden), stride_order=(1, 0)) for _ in range(2))
    w = make_fake_compact_tensor(dt, (hidden,))
    return x, w, y, cutlass.Float32(spec.EPS), hidden, make_fake_stream(use_tvm_ffi_env_stream=True)


def build(workload, dtype, device, variant):
    import cutlass.cute as cute

    compiled = cute.compile(_kernel(), *_signature(workload, dtype), options="--enable-tvm-ffi")

    def rmsnorm(x, weight, out):
        compiled(x, weight, out, spec.EPS)

    return Built(rmsnorm, {"threads": _THREADS})


def compile_for(workload, dtype, device, variant):
    return cute_dsl.compile_for(_kernel(), _signature(workload, dtype), device, {"threads": _THREADS}, "CuTe DSL",
                                options="--enable-tvm-ffi")
