"""rmsnorm designs in TileLang, for `python3 lab/h200_rmsnorm_sweep.py --tilelang` (needs tilelang and a GPU):
a row spread over a thread-block cluster, a row moved by the TMA unit, persistent CTAs pipelining rows through
shared memory, and the committed row kernel at other thread counts, rows per program and L2 prefetch distances.
Measured on an H200: reports/20261201-h200-rmsnorm-tilelang/NOTES.md."""
import sys
from pathlib import Path

sys.path[:0] = [".", str(Path(__file__).parent)]
from opmatrix import paths  # noqa: E402 - the project root is on the path above
from opmatrix.incell import plugins  # noqa: E402
from opmatrix.kit import aot  # noqa: E402
from h200_sweeps import H200  # noqa: E402 - this file's folder

EPS = plugins.load_spec(paths.BUILTIN_KERNELS, "rmsnorm").EPS
TARGET = aot.tilelang_target(H200)  # sm_90a


def cluster_rmsnorm(tokens: int, hidden: int, dtype: str, programs: int, threads: int):
    """TileLang: a row spread over a thread-block cluster of `programs` CTAs, hidden / programs columns each (1-5 KB
    where one program per row moves 8-10 KB). Each CTA reduces its part, writes the partial sum into slot `rank` of
    every CTA's shared memory (distributed shared memory, T.copy_cluster), one cluster barrier (release/acquire)
    makes them visible, and every CTA adds the slots in the same order. A cluster's CTAs are co-scheduled by the
    hardware, so no CTA waits on one that is not running."""
    import tilelang
    import tilelang.language as T

    part_cols = hidden // programs

    @T.prim_func
    def rmsnorm(X: T.Tensor((tokens, hidden), dtype), W: T.Tensor((hidden,), dtype),
                Y: T.Tensor((tokens, hidden), dtype)):
        with T.Kernel(tokens * programs, threads=threads, cluster_dims=programs) as bx:
            row = bx // programs
            rank = bx % programs
            x = T.alloc_fragment((part_cols,), "float32")
            sq = T.alloc_fragment((part_cols,), "float32")
            part = T.alloc_fragment((1,), "float32")
            mine = T.alloc_shared((1,), "float32")
            slots = T.alloc_shared((programs,), "float32")
            total = T.alloc_local((1,), "float32")
            T.copy(X[row, rank * part_cols:(rank + 1) * part_cols], x)
            for j in T.Parallel(part_cols):
                sq[j] = x[j] * x[j]
            T.reduce_sum(sq, part, dim=0)
            T.copy(part, mine)
            tx = T.get_thread_binding(0)
            if tx < programs:
                T.copy_cluster(mine, slots[rank:rank + 1], dst_block=tx)
            T.cluster_sync()
            total[0] = 0.0
            for k in T.serial(programs):
                total[0] += slots[k]
            scale = T.rsqrt(total[0] / hidden + EPS)
            for j in T.Parallel(part_cols):
                x[j] = x[j] * scale * W[rank * part_cols + j]
            T.copy(x, Y[row, rank * part_cols:(rank + 1) * part_cols])

    # Shared-memory reuse off: TileLang's planner sees `slots` live only from the copy on and would place it over
    # the reduction's workspace, where a faster peer's remote write lands while this CTA still reduces.
    return tilelang.compile(rmsnorm, target=TARGET,
                            pass_configs={"tl.disable_shared_memory_reuse": True})


def tma_rmsnorm(tokens: int, hidden: int, dtype: str, threads: int, box: int = 256):
    """TileLang: one row per CTA, moved by the TMA unit (one bulk load into shared memory, one bulk store from it)
    instead of by each thread's loads and stores; the row is a (hidden / box, box) tile of a (tokens * hidden / box,
    box) view, so call it on x.view(-1, box)."""
    import tilelang
    import tilelang.language as T

    rows = hidden // box

    @T.prim_func
    def rmsnorm(X: T.Tensor((tokens * rows, box), dtype), W: T.Tensor((rows, box), dtype),
                Y: T.Tensor((tokens * rows, box), dtype)):
        with T.Kernel(tokens, threads=threads) as bx:
            xs = T.alloc_shared((rows, box), dtype)
            x = T.alloc_fragment((rows, box), "float32")
            sq = T.alloc_fragment((rows, box), "float32")
            part = T.alloc_fragment((rows,), "float32")
            total = T.alloc_fragment((1,), "float32")
            loaded = T.alloc_barrier([threads])
            T.tma_copy(X[bx * rows:(bx + 1) * rows, :], xs, barrier=loaded[0])
            T.barrier_arrive(loaded[0])
            T.barrier_wait(loaded[0], 0)
            T.copy(xs, x)
            for i, j in T.Parallel(rows, box):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, part, dim=1)
            T.reduce_sum(part, total, dim=0)
            for i, j in T.Parallel(rows, box):
                xs[i, j] = x[i, j] * T.rsqrt(total[0] / hidden + EPS) * W[i, j]
            T.copy(xs, Y[bx * rows, 0])

    return tilelang.compile(rmsnorm, target=TARGET)


def pipelined_rmsnorm(tokens: int, hidden: int, dtype: str, sms: int, per_sm: int, threads: int, stages: int,
                      tma_store: bool = False, specialised: bool = True):
    """TileLang: `per_sm` persistent CTAs per SM, each looping over rows bx, bx + programs, ...; the loop is
    T.Pipelined over `stages` rows, which TileLang 0.1.15 lowers on sm_90a to a warp-specialised kernel: a producer
    warpgroup issues one bulk (TMA) load per row into a ring of `stages` shared-memory rows, and `threads`
    consumer threads reduce, scale and store, so the next rows' loads are in flight while one is reduced. The
    weight is loaded once per CTA. `tma_store`: the row leaves through shared memory and one bulk store instead of
    the threads' stores. `specialised=False`: no producer warpgroup, every thread issues the pipelined loads.
    TileLang gives a warp-specialised kernel's consumers 240 registers (setmaxnreg), which leaves room for one CTA
    per SM; here that is turned off and the kernel is compiled for `per_sm` CTAs per SM (__launch_bounds__). The
    last step's rows past the end are clamped to the last row (the same values written again)."""
    import tilelang
    import tilelang.language as T

    programs = sms * per_sm
    steps = -(-tokens // programs)

    @T.prim_func
    def rmsnorm(X: T.Tensor((tokens, hidden), dtype), W: T.Tensor((hidden,), dtype),
                Y: T.Tensor((tokens, hidden), dtype)):
        with T.Kernel(programs, threads=threads) as bx:
            T.annotate_min_blocks_per_sm(per_sm)
            T.disable_warp_group_reg_alloc()
            xs = T.alloc_shared((1, hidden), dtype)
            ys = T.alloc_shared((1, hidden), dtype)
            x = T.alloc_fragment((1, hidden), "float32")
            sq = T.alloc_fragment((1, hidden), "float32")
            total = T.alloc_fragment((1,), "float32")
            w = T.alloc_fragment((hidden,), "float32")
            T.copy(W, w)
            for k in T.Pipelined(steps, num_stages=stages):
                row = T.min(bx + k * programs, tokens - 1)
                T.copy(X[row:row + 1, :], xs)
                T.copy(xs, x)
                for i, j in T.Parallel(1, hidden):
                    sq[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(sq, total, dim=1)
                for i, j in T.Parallel(1, hidden):
                    x[i, j] = x[i, j] * T.rsqrt(total[i] / hidden + EPS) * w[j]
                if tma_store:
                    T.copy(x, ys)
                    T.copy(ys, Y[row:row + 1, :])
                else:
                    T.copy(x, Y[row:row + 1, :])

    return tilelang.compile(rmsnorm, target=TARGET, pass_configs={"tl.disable_warp_specialized": not specialised})


# The committed kernel's L2 prefetch (variant `l2_prefetch`) at other distances, rows per CTA, threads and
# occupancies: (rows per CTA, distance in CTAs per SM, threads or None for the committed count, resident CTAs per SM
# compiled for (caps the registers) or None).
# Measured: 3 ahead the best of 3-24, 12 and 24 ahead at 68-74 % (logs/sweep-l2-prefetch.txt); 2-4 ahead alike,
# 0.5-1 slower, two rows no better (logs/sweep-l2-prefetch-near.txt); the rest: logs/sweep-l2-prefetch-shape.txt.
PREFETCHED = ((1, 2, None, 8), (1, 3, None, 8), (1, 4, None, 8), (1, 3, 128, None), (1, 6, 128, None),
              (1, 1.5, 512, None))


# (CTAs per SM, consumer threads, stages, TMA store, warp-specialised): 2-4 CTAs of 2-4 rows in flight hold
# 32-80 KB of loads per SM.
PIPELINED = ((2, 256, 2, False, True), (2, 256, 3, False, True), (2, 256, 4, False, True), (4, 256, 2, False, True),
             (4, 256, 3, False, True), (2, 128, 3, False, True), (2, 256, 3, True, True), (2, 256, 3, False, False),
             (4, 256, 2, False, False))


def contestants(x, w, y, dtype: str, wanted) -> dict:
    """The committed TileLang kernel, the TMA kernel, the row kernel at other thread counts, rows per program
    (TileLang's reduction needs a power-of-2 thread count) and L2 prefetch distances, the pipelined persistent
    kernels, and the cluster kernel over 2 CTAs (over 4 and 5 CTAs it measured 42-45 % of the ceiling:
    logs/sweep-cluster.txt); those `wanted(name)` accepts, the others not built."""
    import tilelang

    module = plugins.load_impl(paths.BUILTIN_KERNELS, "rmsnorm", "tilelang")
    tokens, hidden = x.shape
    committed = module.build({"tokens": tokens, "hidden": hidden}, dtype, H200, "default")
    fns = {f"committed tilelang {committed.config['threads']} threads": lambda: committed.fn(x, w, y)}
    for threads in (128, 256):
        if wanted(f"tilelang tma threads={threads}"):
            kernel = tma_rmsnorm(tokens, hidden, dtype, threads)
            fns[f"tilelang tma threads={threads}"] = lambda k=kernel: k(x.view(-1, 256), w.view(-1, 256),
                                                                          y.view(-1, 256))
    # Not (2, 512) at hidden 5120: 20 elements a thread do not split into 16-byte vectors, and TileLang's layout
    # inference then gives every thread a whole row (float x[5120] each, 98 ms a call: logs/sweep-tilelang.txt).
    for rows, threads in ((1, 128), (1, 512), (2, 256)) + (((2, 512),) if hidden % 4096 == 0 else ()):
        if (rows, threads) != (committed.config["block_rows"], committed.config["threads"]) and \
                wanted(f"tilelang rows={rows} threads={threads}"):
            kernel = tilelang.compile(module._kernel(tokens, hidden, dtype, rows, threads),
                                      target=TARGET)
            fns[f"tilelang rows={rows} threads={threads}"] = lambda k=kernel: k(x, w, y)
    sms = aot.sm_count(H200)  # this GPU's
    for per_sm, threads, stages, tma_store, specialised in PIPELINED:
        name = (f"tilelang pipelined {per_sm}/SM threads={threads} stages={stages}"
                f"{' tma store' if tma_store else ''}{'' if specialised else ' no producer'}")
        if wanted(name):
            kernel = pipelined_rmsnorm(tokens, hidden, dtype, sms, per_sm, threads, stages, tma_store, specialised)
            fns[name] = lambda k=kernel: k(x, w, y)
    if wanted("committed tilelang l2_prefetch"):
        prefetching = module.build({"tokens": tokens, "hidden": hidden}, dtype, H200, "l2_prefetch")
        fns[f"committed tilelang l2_prefetch {prefetching.config['prefetch_ahead']} ahead"] = \
            lambda: prefetching.fn(x, w, y)
    for rows, per_sm, threads, resident in PREFETCHED:
        name = (f"tilelang L2 prefetch {per_sm}/SM ahead rows={rows}" + (f" threads={threads}" if threads else "")
                + (f" {resident} CTAs/SM" if resident else ""))
        if wanted(name):
            func = module._kernel(tokens, hidden, dtype, rows, threads or committed.config["threads"],
                                  int(per_sm * sms), resident or 0)
            kernel = tilelang.compile(func, target=TARGET)
            fns[name] = lambda k=kernel: k(x, w, y)
    if wanted("tilelang cluster of 2 threads=128"):
        kernel = cluster_rmsnorm(tokens, hidden, dtype, 2, 128)
        fns["tilelang cluster of 2 threads=128"] = lambda: kernel(x, w, y)
    return fns
