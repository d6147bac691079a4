"""CuTe DSL: one CTA of 4 warps per 128 x 128 tile of C. A tiled MMA of 2 x 2 warp-level mma.sync atoms (16 x 8 x 16,
fp32 accumulators: cute.nvgpu.warp.MmaF16BF16Op) partitions the tiles of A (M x K) and B (as N x K, the atom's
K-major operand: a transposed view of the row-major K x N matrix, no copy); each 32-deep K step copies each thread's
operand fragments from global memory into registers (cute.autovec_copy) and issues cute.gemm; relu and the cast on
the way out. The CuTe way of writing a GEMM, at its first rung: no shared-memory staging, no cp.async / TMA
pipeline, no wgmma / tcgen05 (CUTLASS's Python examples add those; the compile-only rows show what this one costs in
registers).

Whole tiles only: M and N multiples of 128 and K of 32 (the kernel has no edge predication), 16-bit inputs only
(the atom's), NVIDIA only; other rows are refused with the reason. Compile-only builds for sm_90a / sm_100a over
fake tensors (opmatrix.kit.cute_dsl)."""
import functools

from opmatrix.kit import Built, Unsupported, cute_dsl, nvidia

_BM, _BN, _BK = 128, 128, 32
_THREADS = 128


@functools.cache
def _kernel():
    """The @cute.jit launcher and its @cute.kernel, made when first wanted (CuTe DSL is imported only then)."""
    import cutlass
    import cutlass.cute as cute

    @cute.kernel
    def _gemm_relu_kernel(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, tiled_mma: cute.TiledMma):
        tidx, _, _ = cute.arch.thread_idx()
        bm, bn, _ = cute.arch.block_idx()
        gA = cute.local_tile(mA, (_BM, _BK), (bm, None))
        gB = cute.local_tile(mB, (_BN, _BK), (bn, None))
        gC = cute.local_tile(mC, (_BM, _BN), (bm, bn))
        thr = tiled_mma.get_slice(tidx)
        tCgA, tCgB, tCgC = thr.partition_A(gA), thr.partition_B(gB), thr.partition_C(gC)
        tCrA = tiled_mma.make_fragment_A(tCgA[None, None, None, 0])
        tCrB = tiled_mma.make_fragment_B(tCgB[None, None, None, 0])
        acc = tiled_mma.make_fragment_C(tCgC)
        acc.fill(0.0)
        for k in cutlass.range(cute.size(gA, mode=[2])):
            cute.autovec_copy(tCgA[None, None, None, k], tCrA)
            cute.autovec_copy(tCgB[None, None, None, k], tCrB)
            cute.gemm(tiled_mma, acc, tCrA, tCrB, acc)
        values = acc.load()
        out = cute.make_rmem_tensor_like(tCgC)
        out.store(cute.where(values > 0.0, values, cute.full_like(values, 0.0)).to(mC.element_type))
        cute.autovec_copy(out, tCgC)

    @cute.jit
    def _gemm_relu(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, stream):
        mBt = cute.make_tensor(mB.iterator, cute.make_layout((mB.shape[1], mB.shape[0]),
                                                             stride=(mB.stride[1], mB.stride[0])))
        atom = cute.nvgpu.warp.MmaF16BF16Op(mA.element_type, cutlass.Float32, (16, 8, 16))
        tiled_mma = cute.make_tiled_mma(atom, (2, 2, 1))
        grid = [cute.ceil_div(mA.shape[0], _BM), cute.ceil_div(mBt.shape[0], _BN), 1]
        _gemm_relu_kernel(mA, mBt, mC, tiled_mma).launch(grid=grid, block=[_THREADS, 1, 1], stream=stream)

    return _gemm_relu


def _signature(workload, dtype, device) -> tuple:
    from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

    nvidia.require(device, "CuTe DSL")
    if dtype == "float32":
        raise Unsupported("this CuTe DSL kernel's mma.sync atom takes 16-bit inputs (fp16, bf16)")
    m, n, k = workload["M"], workload["N"], workload["K"]
    if m % _BM or n % _BN or k % _BK:
        raise Unsupported(f"this CuTe DSL kernel has no edge predication: M and N must be multiples of {_BM}, K of "
                          f"{_BK} (M={m} N={n} K={k})")
    dt = cute_dsl.dtype(dtype)
    a, b, c = (make_fake_compact_tensor(dt, shape, stride_order=(1, 0), assumed_align=16)
               for shape in ((m, k), (k, n), (m, n)))
    return a, b, c, make_fake_stream(use_tvm_ffi_env_stream=True)


def _config() -> dict:
    return {"BM": _BM, "BN": _BN, "BK": _BK, "threads": _THREADS, "mma": "mma.sync 16x8x16, 2x2 warps"}


def build(workload, dtype, device, variant):
    import cutlass.cute as cute

    compiled = cute.compile(_kernel(), *_signature(workload, dtype, device), options="--enable-tvm-ffi")
    return Built(lambda a, b, out: compiled(a, b, out), _config())


def compile_for(workload, dtype, device, variant):
    return cute_dsl.compile_for(_kernel(), _signature(workload, dtype, device), device, _config(), "CuTe DSL",
                                options="--enable-tvm-ffi")
