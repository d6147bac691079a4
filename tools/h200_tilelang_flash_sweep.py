"""TileLang flash attention forward against cuDNN's SDPA back-end on a GPU, in interleaved rounds: the design
choices of the `fa3` kernel of kernels/flash_attention/tilelang.py (FlashAttention-3's intra-warpgroup overlap of
one block's softmax with the previous block's P V, ping-pong between the consumer warpgroups, K/V block width),
each built with the kernel's own `_fa3_kernel`, and optionally the committed variants themselves.

    python3 tools/h200_tilelang_flash_sweep.py [ROUNDS [WORKLOAD ...]] [--designs A,B] [--variants fa3]
        [--persistent]                        # project root; torch, triton, tilelang

Timed like opmatrix's cells time rows (triton's do_bench, L2 flushed, median of a burst); each round visits every
contestant of a (workload, dtype) in a fresh shuffled order, and the speed-up is the median per-round ratio to
cuDNN with its 95 % bootstrap interval (opmatrix.decide.stats). Every output is first checked against the fp64
reference of kernels/flash_attention/spec.py on the small workloads (poisoned outputs, a ragged causal one) and
against cuDNN's output (the spec's tolerance) on the timed ones. Issue "Fair verdicts need strong contestants":
TileLang >= 1.0x cuDNN: reports/20261201-h200-tilelang-flash-sweep/NOTES.md."""
import argparse
import random
import sys

import torch
from triton.testing import do_bench

sys.path.insert(0, ".")
from opmatrix import paths  # noqa: E402 - the project root is on the path above
from opmatrix.core.jobs import DeviceInfo  # noqa: E402
from opmatrix.decide import stats  # noqa: E402
from opmatrix.incell import plugins  # noqa: E402

H200 = DeviceInfo("h200", "nvidia", "sm_90", "H200")
SPEC = plugins.load_spec(paths.KERNELS, "flash_attention")
TIMED = ["b8_h32_s4096_d128", "b8_h32_s4096_d128_causal", "b1_h32_s8192_d128", "b1_h32_s8192_d128_causal"]
SMALL = ["b1_h2_s128_d64", "b1_h2_s127_d64_causal"]
# every design the NOTES compare (its logs each timed a subset: the tool's DESIGNS at the time)
DESIGNS = {"overlap": {"block_N": 128, "stages": 2, "pingpong": False},
           "pingpong": {"block_N": 128, "stages": 2, "pingpong": True},
           "pingpong176": {"block_N": 176, "stages": 2, "pingpong": True},
           "pingpong176-lpt": {"block_N": 176, "stages": 2, "pingpong": True, "lpt": True},
           "pingpong128-lpt": {"block_N": 128, "stages": 2, "pingpong": True, "lpt": True}}


def persistent_kernel(batch, heads, seq, dim, dtype, block_N=128, stages=2, sms=132, block_M=128):
    """Experiment, non-causal only: `fa3`'s overlapped consumer loop in a persistent kernel. One CTA per SM walks
    the (query block, head, batch) tiles round-robin; the producer loads the next tile's Q (a q_empty mbarrier
    says the consumers' last QK^T is done) and its first K/V blocks while the consumers finish the current tile's
    last P V and store O. The K/V stage counter runs on across tiles (n_blocks per tile)."""
    import tilelang.language as T

    tl = plugins.load_impl(paths.KERNELS, "flash_attention", "tilelang")
    shape = (batch, heads, seq, dim)
    scale = SPEC.softmax_scale(dim) * tl._LOG2E
    neg_inf = -T.infinity("float32")
    n_q, n_blocks = -(-seq // block_M), -(-seq // block_N)
    tiles = n_q * heads * batch
    waves = -(-tiles // sms)
    ragged = seq % block_N != 0
    full_row = T.GemmWarpPolicy.FullRow

    @T.macro
    def softmax(k, S, m, m_prev, alpha, row_sum, total):
        if ragged:
            if k == n_blocks - 1:
                for i, j in T.Parallel(block_M, block_N):
                    S[i, j] = T.if_then_else(k * block_N + j < seq, S[i, j], neg_inf)
        T.copy(m, m_prev)
        T.reduce_max(S, m, dim=1, clear=False)
        for i in T.Parallel(block_M):
            alpha[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
        for i, j in T.Parallel(block_M, block_N):
            S[i, j] = T.exp2(S[i, j] * scale - m[i] * scale)
        T.reduce_sum(S, row_sum, dim=1)
        for i in T.Parallel(block_M):
            total[i] = total[i] * alpha[i] + row_sum[i]

    @T.prim_func
    def attention(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                  O: T.Tensor(shape, dtype)):
        with T.Kernel(sms, threads=384) as cta:
            Q_s = T.alloc_shared((block_M, dim), dtype)
            K_s = T.alloc_shared((stages, block_N, dim), dtype)
            V_s = T.alloc_shared((stages, block_N, dim), dtype)
            S = T.alloc_fragment((block_M, block_N), "float32")
            P = T.alloc_fragment((block_M, block_N), dtype)
            acc = T.alloc_fragment((block_M, dim), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            m_prev = T.alloc_fragment((block_M,), "float32")
            alpha = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            total = T.alloc_fragment((block_M,), "float32")
            q_full = T.alloc_barrier([128])
            q_empty = T.alloc_barrier([256])
            k_full = T.alloc_barrier([128] * stages)
            v_full = T.alloc_barrier([128] * stages)
            k_empty = T.alloc_barrier([256] * stages)
            v_empty = T.alloc_barrier([256] * stages)
            tx = T.get_thread_binding()
            if tx < 128:
                T.dec_max_nreg(24)
                for w in T.serial(waves):
                    if w * sms + cta < tiles:
                        t = w * sms + cta
                        bx, by, bz = t % n_q, (t // n_q) % heads, t // (n_q * heads)
                        T.barrier_wait(q_empty[0], (w % 2) ^ 1)
                        T.tma_copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], Q_s, barrier=q_full[0])
                        T.barrier_arrive(q_full[0])
                        for k in T.serial(n_blocks):
                            it = w * n_blocks + k
                            T.barrier_wait(k_empty[it % stages], ((it // stages) % 2) ^ 1)
                            T.tma_copy(K[bz, by, k * block_N:(k + 1) * block_N, :], K_s[it % stages, :, :],
                                       barrier=k_full[it % stages])
                            T.barrier_arrive(k_full[it % stages])
                            T.barrier_wait(v_empty[it % stages], ((it // stages) % 2) ^ 1)
                            T.tma_copy(V[bz, by, k * block_N:(k + 1) * block_N, :], V_s[it % stages, :, :],
                                       barrier=v_full[it % stages])
                            T.barrier_arrive(v_full[it % stages])
            else:
                T.inc_max_nreg(240)
                for w in T.serial(waves):
                    if w * sms + cta < tiles:
                        t = w * sms + cta
                        bx, by, bz = t % n_q, (t // n_q) % heads, t // (n_q * heads)
                        base = w * n_blocks
                        T.fill(acc, 0)
                        T.fill(total, 0)
                        T.fill(m, neg_inf)
                        T.barrier_wait(q_full[0], w % 2)
                        T.barrier_wait(k_full[base % stages], (base // stages) % 2)
                        T.wgmma_gemm(Q_s, K_s[base % stages, :, :], S, transpose_B=True, clear_accum=True,
                                     policy=full_row)
                        T.wait_wgmma(0)
                        T.barrier_arrive(k_empty[base % stages])
                        softmax(0, S, m, m_prev, alpha, row_sum, total)
                        T.copy(S, P)
                        for k in T.serial(1, n_blocks):
                            it = base + k
                            T.barrier_wait(k_full[it % stages], (it // stages) % 2)
                            T.barrier_wait(v_full[(it - 1) % stages], ((it - 1) // stages) % 2)
                            T.wgmma_gemm(Q_s, K_s[it % stages, :, :], S, transpose_B=True, clear_accum=True,
                                         policy=full_row)
                            T.wgmma_gemm(P, V_s[(it - 1) % stages, :, :], acc, policy=full_row)
                            T.wait_wgmma(1)
                            T.barrier_arrive(k_empty[it % stages])
                            softmax(k, S, m, m_prev, alpha, row_sum, total)
                            T.wait_wgmma(0)
                            T.barrier_arrive(v_empty[(it - 1) % stages])
                            for i, j in T.Parallel(block_M, dim):
                                acc[i, j] *= alpha[i]
                            T.copy(S, P)
                        T.barrier_arrive(q_empty[0])  # every QK^T of this tile is done: Q_s may be reloaded
                        last = base + n_blocks - 1
                        T.barrier_wait(v_full[last % stages], (last // stages) % 2)
                        T.wgmma_gemm(P, V_s[last % stages, :, :], acc, policy=full_row)
                        T.wait_wgmma(0)
                        T.barrier_arrive(v_empty[last % stages])
                        for i, j in T.Parallel(block_M, dim):
                            acc[i, j] /= total[i]
                        T.copy(acc, O[bz, by, bx * block_M:(bx + 1) * block_M, :])

    return attention


def _compiled(kernel):
    def attention(q, k, v, o):
        kernel(q, k, v, o)
    return attention


def contestants(workload: dict, dtype: str, designs=tuple(DESIGNS), variants=(), persistent=False) -> dict:
    """cuDNN, the committed TileLang `variants`, one kernel per named design of DESIGNS and, for a sequence
    without a causal mask, the persistent experiment."""
    import tilelang

    tl = plugins.load_impl(paths.KERNELS, "flash_attention", "tilelang")
    sdpa = plugins.load_impl(paths.KERNELS, "flash_attention", "torch")
    target = tl.aot.tilelang_target(H200)
    out = {"torch[cudnn]": sdpa.build(workload, dtype, H200, "cudnn").fn}
    out.update({f"tilelang[{v}]": tl.build(workload, dtype, H200, v).fn for v in variants})
    for name in designs:
        out[f"design/{name}"] = _compiled(tilelang.compile(tl._fa3_func(workload, dtype, DESIGNS[name]),
                                                           target=target, pass_configs=tl._FA3_PASSES))
    if persistent and not workload["causal"]:
        w = workload
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        out["experiment/persistent"] = _compiled(tilelang.compile(
            persistent_kernel(w["batch"], w["heads"], w["seq"], w["head_dim"], dtype, sms=sms), target=target,
            pass_configs=tl._FA3_PASSES))
    return out


def call(fn, inputs, out):
    result = fn(*inputs, out)
    return out if result is None else result


def max_error(got, want) -> float:
    return ((got.double() - want.double()).abs().max() / want.double().abs().max()).item()


def check_small(choice: dict) -> None:
    for name in SMALL:
        w = SPEC.WORKLOADS[name]
        for dtype in ("float16", "bfloat16"):
            inputs = SPEC.make_inputs(w, dtype, "cuda", seed=0)
            want = SPEC.reference(inputs, w)
            for cname, fn in contestants(w, dtype, **choice).items():
                out = torch.full_like(inputs[0], float("nan"))  # poisoned: a row never written shows
                err = max_error(call(fn, inputs, out), want)
                print(f"{name} {dtype} {cname}: max error vs fp64 {err:.2e} "
                      f"({'ok' if err <= SPEC.tolerance(dtype) else 'WRONG'})", flush=True)


def sweep(name: str, dtype: str, rounds: int, choice: dict) -> None:
    w = SPEC.WORKLOADS[name]
    inputs = SPEC.make_inputs(w, dtype, "cuda", seed=0)
    fns = contestants(w, dtype, **choice)
    outs = {cname: torch.full_like(inputs[0], float("nan")) for cname in fns}
    first = {cname: call(fn, inputs, outs[cname]) for cname, fn in fns.items()}
    for cname, got in first.items():
        err = max_error(got, first["torch[cudnn]"])
        print(f"{name} {dtype} {cname}: max error vs cuDNN {err:.2e} "
              f"({'ok' if err <= SPEC.tolerance(dtype) else 'WRONG'})", flush=True)
    times = {cname: [] for cname in fns}
    for _ in range(rounds):
        order = list(fns)
        random.shuffle(order)
        for cname in order:
            times[cname].append(do_bench(lambda c=cname: call(fns[c], inputs, outs[c]), warmup=5, rep=20,
                                         return_mode="median"))
    for cname in fns:
        interval = stats.median_interval(stats.ratios(times[cname], times["torch[cudnn]"]))
        ms = sorted(times[cname])[len(times[cname]) // 2]
        tflops = SPEC.flops(w) / ms / 1e9
        print(f"{name} {dtype} {cname:18} {ms:.4f} ms {tflops:5.0f} TFLOP/s  speed-up over cuDNN "
              f"{interval.text() if interval else '-'}  ({rounds} rounds)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rounds", type=int, nargs="?", default=10)
    parser.add_argument("workloads", nargs="*", default=TIMED)
    parser.add_argument("--designs", default=",".join(DESIGNS), help="comma-separated names of DESIGNS ('' none)")
    parser.add_argument("--variants", default="", help="committed TileLang variants too, e.g. fa3,tuned")
    parser.add_argument("--persistent", action="store_true", help="the persistent experiment (non-causal)")
    args = parser.parse_args()
    choice = {"designs": [d for d in args.designs.split(",") if d],
              "variants": [v for v in args.variants.split(",") if v], "persistent": args.persistent}
    check_small(choice)
    for name in args.workloads:
        for dtype in ("float16", "bfloat16"):
            sweep(name, dtype, args.rounds, choice)


if __name__ == "__main__":
    main()
