"""Triton: one program per row, the whole row in registers, fp32 sums.

The row is held as a block of A columns (the largest power of 2 <= hidden) and, when hidden is not a power of 2, a
second block of B (the next power of 2 >= the rest). One block of next_power_of_2(hidden) would mask 3 of every 8
lanes at hidden 5120 (8192 lanes), and ran well below the two blocks 4096 + 1024 on an H200
(reports/20261130-h200-rmsnorm-bound/NOTES.md, lab/h200_rmsnorm_sweep.py). Warps: 4 for a split row (8 and 16
measured slower there), else one per 512 columns, 4 to 16.

Variants: `default`; `l2_prefetch` (Hopper and later), the same kernel whose program first has the TMA unit bring
the row of the program 3 x SMs launches ahead into L2 (one `cp.async.bulk.prefetch.L2` from the first thread,
inline PTX): TileLang's `l2_prefetch` (kernels/rmsnorm/tilelang.py says why) written in Triton. Paired on two H200s
(reports/20261201-h200-rmsnorm-l2-prefetch-triton and -repeat; docs/results.md): faster than `default` at
llama_4096, level at odd_5120, where the split row's registers hold the kernel instead.
"""
import triton
import triton.language as tl

from opmatrix.kit import ITEMSIZE, Built, Unsupported, aot, load_spec

spec = load_spec(__file__)
VARIANTS = ("default", "l2_prefetch")


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, tokens, hidden, stride, row_bytes, eps, A: tl.constexpr, B: tl.constexpr,
                    AHEAD: tl.constexpr):
    row = tl.program_id(0)
    if AHEAD > 0:  # the first thread prefetches the row of program row + AHEAD into L2 (bulk, by the TMA unit)
        if row + AHEAD < tokens:
            tl.inline_asm_elementwise(
                "{ .reg .pred first; .reg .u32 lane; mov.u32 lane, %tid.x; setp.eq.u32 first, lane, 0; "
                "@first cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
                "=r,l,r", [x_ptr + (row + AHEAD).to(tl.int64) * stride, row_bytes], dtype=tl.int32,
                is_pure=False, pack=1)
    ca = tl.arange(0, A)
    ma = ca < hidden
    xa = tl.load(x_ptr + row * stride + ca, mask=ma, other=0.0).to(tl.float32)
    ss = tl.sum(xa * xa, axis=0)
    if B > 0:
        cb = A + tl.arange(0, B)
        mb = cb < hidden
        xb = tl.load(x_ptr + row * stride + cb, mask=mb, other=0.0).to(tl.float32)
        ss += tl.sum(xb * xb, axis=0)
    scale = tl.rsqrt(ss / hidden + eps)
    wa = tl.load(w_ptr + ca, mask=ma, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + ca, (xa * scale * wa).to(y_ptr.dtype.element_ty), mask=ma)
    if B > 0:
        wb = tl.load(w_ptr + cb, mask=mb, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride + cb, (xb * scale * wb).to(y_ptr.dtype.element_ty), mask=mb)


def _row_blocks(hidden: int, gpu: bool) -> dict:
    """The row's two blocks (A, B) and the warps, as the module docstring says."""
    a = 1 << (hidden.bit_length() - 1)
    b = triton.next_power_of_2(hidden - a) if hidden > a else 0
    warps = (4 if b else min(16, max(4, a // 512))) if gpu else 4
    return {"A": a, "B": b, "num_warps": warps}


def _config(hidden: int, dtype: str, device, variant: str, sms) -> dict:
    """_row_blocks, and AHEAD: the prefetch distance in programs (0: none). `sms`: the SM count, a function, read
    only for `l2_prefetch`."""
    ahead = 0
    if variant == "l2_prefetch":
        aot.require_bulk_l2_prefetch(device, variant)
        row_bytes = hidden * ITEMSIZE[dtype]
        if row_bytes % 16:
            raise Unsupported(f"`l2_prefetch` prefetches whole rows in 16-byte units: a row of {hidden} {dtype} is "
                              f"{row_bytes} bytes")
        ahead = spec.L2_PREFETCH_PER_SM * sms(device)
    return dict(_row_blocks(hidden, device.is_gpu), AHEAD=ahead)


def _constexprs(config: dict) -> dict:
    """The kernel's compile-time arguments out of a _config record (the rest is num_warps, a launch option)."""
    return {key: config[key] for key in ("A", "B", "AHEAD")}


def build(workload, dtype, device, variant):
    tokens, hidden = workload["tokens"], workload["hidden"]
    config = _config(hidden, dtype, device, variant, aot.sm_count)
    constexprs = _constexprs(config)
    row_bytes = hidden * ITEMSIZE[dtype]

    def rmsnorm(x, weight, out):
        _rmsnorm_kernel[(tokens,)](x, weight, out, tokens, hidden, x.stride(0), row_bytes, spec.EPS, **constexprs,
                                   num_warps=config["num_warps"])

    return Built(rmsnorm, config)


def compile_for(workload, dtype, device, variant):
    """No host has the device: compile ahead of time for it (CUDA cubin or AMD hsaco)."""
    config = _config(workload["hidden"], dtype, device, variant, aot.known_sm_count)
    return aot.triton_compile_for(_rmsnorm_kernel, dtype, _constexprs(config), {"num_warps": config["num_warps"]},
                                  device)
