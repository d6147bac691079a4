"""rmsnorm against copy bandwidth on a GPU, in interleaved rounds: the committed Triton kernel, torch's F.rms_norm,
variants of a split-row Triton kernel, and copies of the same bytes (the row-layout copy is the bound for any
kernel that reads x and writes y once in that layout).

    python3 lab/h200_rmsnorm_sweep.py [ROUNDS] [--persistent | --tilelang] [--only PART ...]   # on a GPU host

Copies: torch's `copy_` (for contiguous tensors of one dtype PyTorch's CUDA copy calls cudaMemcpyAsync), a
Triton copy in the kernel's row layout, and a flat Triton copy with no rows (1K-16K elements per program).
Split-row variants: one row per program at 1, 2, 4 and 8 warps (1 and 2: a warp or two hold the whole row, so
each lane has 4-8 loads of 16 bytes in flight and no CTA-wide reduction), two rows at 1 and 2. `--persistent`
adds the persistent variants (1, 2, 4 programs per SM; 4 or 8 warps; 1-3 pipelined rows), measured slower.
A row spread over 2-5 programs (spread_rows: partial sums shared through global memory) measured 56-80 %.
`--tilelang` (needs tilelang; the kernels are in lab/h200_rmsnorm_tilelang.py) replaces the Triton variants with
TileLang's row kernel at other thread counts and rows per program, a row spread over a thread-block cluster of 2
CTAs (distributed shared memory; 67-72 %), a row moved by the TMA unit (one bulk load and one bulk store;
87-91 %), persistent CTAs pipelining rows through shared memory (76-87 %; some warp-specialised configurations
give wrong rows), and the committed kernel's L2 prefetch (variant `l2_prefetch`, 92-94 %) at other distances and
shapes. `--only PART` keeps the contestants whose name holds PART.

Every contestant is timed like opmatrix's cells time rows (triton's do_bench, L2 flushed, median of a burst); each
round visits all contestants of a (workload, dtype) in a fresh shuffled order, so a power-state drift hits them
alike. Shares are of the 2 GiB copy ceiling measured by the cell probe's own code (opmatrix.incell.ceilings).
Each variant's output is checked against the committed kernel's first. Issue "Fair verdicts need strong
contestants", goal rmsnorm >= 92 % of copy bandwidth at llama_4096 and odd_5120:
reports/20261130-h200-rmsnorm-bound/NOTES.md and reports/20261201-h200-rmsnorm-tilelang/NOTES.md."""
import argparse
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

sys.path[:0] = [".", str(Path(__file__).parent)]
from opmatrix import paths  # noqa: E402 - the project root is on the path above
from opmatrix.incell import ceilings, plugins  # noqa: E402
import h200_rmsnorm_tilelang  # noqa: E402 - this file's folder
from h200_sweeps import H200, burst_median_ms, interleaved_rounds  # noqa: E402 - this file's folder
COMMITTED = plugins.load_impl(paths.BUILTIN_KERNELS, "rmsnorm", "triton")  # kernels/rmsnorm/triton.py


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="rmsnorm against copy bandwidth, in interleaved rounds")
    parser.add_argument("rounds", nargs="?", type=int, default=15)
    parser.add_argument("--persistent", action="store_true", help="the persistent variants too (measured slower)")
    parser.add_argument("--tilelang", action="store_true",
                        help="instead of the Triton variants: TileLang's row kernel at several thread counts and a "
                             "row spread over a thread-block cluster (needs tilelang), against the committed Triton "
                             "kernel and copies")
    parser.add_argument("--only", action="append", default=[], metavar="PART",
                        help="time only the contestants whose name holds PART (repeatable; torch's copy_, the "
                             "reference, always), e.g. --only tma --only 'committed tilelang'")
    return parser.parse_args()


ARGS = _arguments()
ROUNDS, PERSISTENT, TILELANG = ARGS.rounds, ARGS.persistent, ARGS.tilelang
ONLY = ARGS.only
EPS = plugins.load_spec(paths.BUILTIN_KERNELS, "rmsnorm").EPS


def bench(fn):
    return burst_median_ms(fn, warmup_ms=10, rep_ms=40)


@triton.jit
def split_rows(x_ptr, w_ptr, y_ptr, tokens, hidden, eps, A: tl.constexpr, B: tl.constexpr, ROWS: tl.constexpr,
               HINTS: tl.constexpr, COPY: tl.constexpr):
    """ROWS rows per program; each row as a block of A columns (the largest power of 2 <= hidden) and, when hidden
    is not a power of 2, a second block of B (the next power of 2 >= the rest): 5120 = 4096 + 1024 leaves no lane
    masked, where one 8192 block masks 37.5 %. COPY: move the bytes only (the layout's bound)."""
    for i in tl.static_range(ROWS):
        row = tl.program_id(0).to(tl.int64) * ROWS + i
        if row < tokens:
            base = row * hidden
            ca = tl.arange(0, A)
            if HINTS:
                xa = tl.load(x_ptr + base + ca, eviction_policy="evict_first").to(tl.float32)
            else:
                xa = tl.load(x_ptr + base + ca).to(tl.float32)
            ss = tl.sum(xa * xa, axis=0)
            if B > 0:
                cb = A + tl.arange(0, B)
                mb = cb < hidden
                if HINTS:
                    xb = tl.load(x_ptr + base + cb, mask=mb, other=0.0, eviction_policy="evict_first").to(tl.float32)
                else:
                    xb = tl.load(x_ptr + base + cb, mask=mb, other=0.0).to(tl.float32)
                ss += tl.sum(xb * xb, axis=0)
            scale = tl.rsqrt(ss / hidden + eps)
            dtype = y_ptr.dtype.element_ty
            if COPY:
                ya = xa
            else:
                ya = xa * scale * tl.load(w_ptr + ca).to(tl.float32)
            if HINTS:
                tl.store(y_ptr + base + ca, ya.to(dtype), cache_modifier=".cs")
            else:
                tl.store(y_ptr + base + ca, ya.to(dtype))
            if B > 0:
                if COPY:
                    yb = xb
                else:
                    yb = xb * scale * tl.load(w_ptr + cb, mask=mb, other=0.0).to(tl.float32)
                if HINTS:
                    tl.store(y_ptr + base + cb, yb.to(dtype), mask=mb, cache_modifier=".cs")
                else:
                    tl.store(y_ptr + base + cb, yb.to(dtype), mask=mb)


@triton.jit
def persistent_rows(x_ptr, w_ptr, y_ptr, tokens, hidden, eps, A: tl.constexpr, B: tl.constexpr,
                    STAGES: tl.constexpr):
    """A few programs per SM, each looping over rows (stride: the grid), the weight loaded once per program; the
    loop software-pipelined over STAGES rows (the next row's loads in flight while this one is reduced)."""
    ca = tl.arange(0, A)
    wa = tl.load(w_ptr + ca).to(tl.float32)
    cb = A + tl.arange(0, B if B > 0 else 1)
    mb = (cb < hidden) & (B > 0)
    wb = tl.load(w_ptr + cb, mask=mb, other=0.0).to(tl.float32)
    dtype = y_ptr.dtype.element_ty
    for row in tl.range(tl.program_id(0), tokens, tl.num_programs(0), num_stages=STAGES):
        base = row * hidden  # < 2**31 elements at these shapes
        xa = tl.load(x_ptr + base + ca).to(tl.float32)
        xb = tl.load(x_ptr + base + cb, mask=mb, other=0.0).to(tl.float32)
        scale = tl.rsqrt((tl.sum(xa * xa, axis=0) + tl.sum(xb * xb, axis=0)) / hidden + eps)
        tl.store(y_ptr + base + ca, (xa * scale * wa).to(dtype))
        tl.store(y_ptr + base + cb, (xb * scale * wb).to(dtype), mask=mb)


@triton.jit
def spread_rows(x_ptr, w_ptr, y_ptr, words_ptr, hidden, eps, S: tl.constexpr, SP: tl.constexpr, P: tl.constexpr,
                A: tl.constexpr, B: tl.constexpr):
    """A row spread over S consecutive programs, P = hidden / S columns each (blocks A + B as in split_rows), so a
    program moves 2-5 KB instead of a whole row. The programs of a row share their partial sums of squares through
    global memory: each owns one int64 word, [sequence number : 32 | fp32 partial : 32], written with one atomic
    exchange, and spins (atomic reads) until every word of its row carries this launch's sequence number (its own
    previous number + 1: the S words of a row always advance together, so no reset and no host-side epoch). The
    total is summed in the same order in every program of the row. Assumes the programs of a row are resident
    together: consecutive program ids are dispatched in order, as CUTLASS's serial split-K semaphores assume."""
    pid = tl.program_id(0).to(tl.int64)
    row = pid // S
    base = row * hidden + (pid % S) * P
    ca = tl.arange(0, A)
    xa = tl.load(x_ptr + base + ca).to(tl.float32)
    part = tl.sum(xa * xa, axis=0)
    if B > 0:
        cb = A + tl.arange(0, B)
        mb = cb < P
        xb = tl.load(x_ptr + base + cb, mask=mb, other=0.0).to(tl.float32)
        part += tl.sum(xb * xb, axis=0)
    seq = (tl.load(words_ptr + pid) >> 32) + 1
    tl.atomic_xchg(words_ptr + pid, (seq << 32) | (part.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF))
    lanes = tl.arange(0, SP)
    mine = lanes < S
    peers = words_ptr + row * S + lanes
    seen = tl.atomic_add(peers, tl.zeros([SP], tl.int64), mask=mine, sem="acquire")
    while tl.min(tl.where(mine, seen >> 32, seq), axis=0) < seq:
        seen = tl.atomic_add(peers, tl.zeros([SP], tl.int64), mask=mine, sem="acquire")
    parts = (seen & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    scale = tl.rsqrt(tl.sum(tl.where(mine, parts, 0.0), axis=0) / hidden + eps)
    dtype = y_ptr.dtype.element_ty
    col = (pid % S) * P
    tl.store(y_ptr + base + ca, (xa * scale * tl.load(w_ptr + col + ca).to(tl.float32)).to(dtype))
    if B > 0:
        yb = xb * scale * tl.load(w_ptr + col + cb, mask=mb, other=0.0).to(tl.float32)
        tl.store(y_ptr + base + cb, yb.to(dtype), mask=mb)


def spread(x, w, y, programs, warps):
    """The row over `programs` programs (spread_rows), with the words it needs, zeroed once."""
    tokens, hidden = x.shape
    p = hidden // programs
    a, b = split(p)
    words = torch.zeros(tokens * programs, device=x.device, dtype=torch.int64)
    return lambda: spread_rows[(tokens * programs,)](x, w, y, words, hidden, EPS, S=programs,
                                                     SP=triton.next_power_of_2(programs), P=p, A=a, B=b,
                                                     num_warps=warps)


@triton.jit
def flat_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y = x as one flat array, BLOCK elements per program: no rows at all (the bound of a Triton kernel that moves
    these bytes, against the cudaMemcpyAsync behind torch's copy_)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def flat(x, y, block, warps):
    n = x.numel()
    return lambda: flat_copy[(triton.cdiv(n, block),)](x, y, n, BLOCK=block, num_warps=warps)


def persistent(x, w, y, per_sm, warps, stages):
    tokens, hidden = x.shape
    a, b = split(hidden)
    grid = (min(tokens, per_sm * torch.cuda.get_device_properties(x.device).multi_processor_count),)
    return lambda: persistent_rows[grid](x, w, y, tokens, hidden, EPS, A=a, B=b, STAGES=stages, num_warps=warps)


def split(width: int) -> tuple[int, int]:
    """The two blocks (A, B) of `width` columns (a row, or a program's part of one) as the committed kernel chooses
    them for a row (kernels/rmsnorm/triton.py _row_blocks)."""
    config = COMMITTED._row_blocks(width, True)
    return config["A"], config["B"]


def variant(x, w, y, rows, warps, hints, copy=False):
    tokens, hidden = x.shape
    a, b = split(hidden)
    grid = (triton.cdiv(tokens, rows),)
    return lambda: split_rows[grid](x, w, y, tokens, hidden, EPS, A=a, B=b, ROWS=rows, HINTS=hints, COPY=copy,
                                    num_warps=warps)


def wanted(name: str) -> bool:
    return not ONLY or name == "copy: torch copy_ x->y" or any(part in name for part in ONLY)


def main() -> None:
    ceiling = ceilings.measure_ceilings("cuda", [])["copy_gbps"]  # the cell probe's own 2 GiB copy ceiling
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}, triton {triton.__version__}; "
          f"copy ceiling (2 GiB, median) {ceiling:.0f} GB/s; {ROUNDS} interleaved rounds")
    for workload in ("llama_4096", "odd_5120"):
        shape = {"llama_4096": (16384, 4096), "odd_5120": (16383, 5120)}[workload]
        for dtype in (torch.float16, torch.bfloat16):
            tokens, hidden = shape
            x = torch.randn(tokens, hidden, device="cuda", dtype=dtype)
            w = torch.randn(hidden, device="cuda", dtype=dtype)
            y = torch.empty_like(x)
            nbytes = 2 * x.numel() * x.element_size() + w.numel() * w.element_size()
            committed = COMMITTED.build({"tokens": tokens, "hidden": hidden}, str(dtype).split(".")[1], H200,
                                   "default").fn
            committed(x, w, y)
            expect = y.clone()
            fns = {"committed triton": lambda: committed(x, w, y),
                   "torch F.rms_norm": lambda: F.rms_norm(x, (hidden,), w, EPS),
                   "copy: torch copy_ x->y": lambda: y.copy_(x)}
            candidates = {f"split rows={rows} warps={warps}": variant(x, w, y, rows, warps, False)
                          for rows, warps in (() if TILELANG else ((1, 1), (1, 2), (1, 4), (1, 8), (2, 1), (2, 2)))}
            if TILELANG:
                candidates.update(h200_rmsnorm_tilelang.contestants(x, w, y, str(dtype).split(".")[1], wanted))
            for programs in () if TILELANG else (2, 4, 5):
                for warps in (2, 4) if hidden % programs == 0 else ():
                    candidates[f"spread over {programs} programs warps={warps}"] = spread(x, w, y, programs, warps)
            for per_sm in (1, 2, 4) if PERSISTENT else ():
                for warps in (4, 8):
                    for stages in (1, 2, 3):
                        candidates[f"persistent {per_sm}/SM warps={warps} stages={stages}"] = \
                            persistent(x, w, y, per_sm, warps, stages)
            candidates = {name: fn for name, fn in candidates.items() if wanted(name)}
            for name, fn in candidates.items():
                y.zero_()
                fn()
                if not torch.allclose(y.float(), expect.float(), rtol=1e-2, atol=1e-2):
                    print(f"  {name}: WRONG, skipped (max |error| {(y.float() - expect.float()).abs().max():.3g})")
                    continue
                fns[name] = fn
            if not TILELANG:
                fns["copy: split layout, rows=1 warps=8"] = variant(x, w, y, 1, 8, False, copy=True)
                fns["copy: split layout, rows=1 warps=2"] = variant(x, w, y, 1, 2, False, copy=True)
            flats = ((1024, 4), (2048, 4)) if TILELANG else ((1024, 2), (1024, 4), (2048, 2), (2048, 4), (4096, 8),
                                                             (8192, 8), (16384, 16))
            for block, warps in flats:
                fns[f"copy: triton flat, {block} per program, warps={warps}"] = flat(x, y, block, warps)
            fns = {name: fn for name, fn in fns.items() if wanted(name)}
            medians = interleaved_rounds(fns, ROUNDS, bench)
            for name in candidates:  # again after thousands of calls: a stale partial sum would show here
                if name in fns:
                    y.zero_()
                    fns[name]()
                    if not torch.allclose(y.float(), expect.float(), rtol=1e-2, atol=1e-2):
                        print(f"  {name}: WRONG after the rounds")
            same_copy = medians["copy: torch copy_ x->y"]
            print(f"\n{workload} {str(dtype).split('.')[1]}: {nbytes / 1e6:.0f} MB moved per call")
            ranked = sorted(fns, key=lambda n: statistics.median(medians[n]))
            for name in ranked:
                ms = statistics.median(medians[name])
                ratios = sorted(c / m for c, m in zip(same_copy, medians[name]))
                gbps = nbytes / (ms / 1e3) / 1e9
                print(f"  {name:42s} {ms * 1e3:8.1f} us {gbps:6.0f} GB/s {100 * gbps / ceiling:5.1f} % of ceiling; "
                      f"vs torch copy of the same bytes {statistics.median(ratios):.3f}x "
                      f"(rounds p10-p90 {ratios[len(ratios) // 10]:.3f}-{ratios[-1 - len(ratios) // 10]:.3f})")


if __name__ == "__main__":
    main()
