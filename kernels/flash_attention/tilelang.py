"""TileLang flash attention forward (the online-softmax technique of TileLang's flash-attention example, written
here): a program per (query block, head, batch); K and V stream through shared memory in a software pipeline;
S = Q K^T and O += P V on the tensor cores (T.gemm); running max and sum in fp32 registers. Causal programs stop
at their diagonal; columns past the sequence end are masked. GPU only (no CPU lowering).

Variants: `fixed` (_CONFIG) and `tuned` (block sizes, stages and threads chosen per workload by TileLang's
autotuner on the device; opmatrix.kit.tune tunes twice and records whether the choice held)."""
from opmatrix.kit import Built, Unsupported, aot, load_spec, tune

spec = load_spec(__file__)
VARIANTS = ("fixed", "tuned")
_CONFIG = {"block_M": 128, "block_N": 64, "num_stages": 2, "threads": 256}
_TUNE_SPACE = [dict(block_M=bm, block_N=bn, num_stages=st, threads=128 if bm == 64 else 256)
              for bm in (64, 128) for bn in (64, 128) for st in (1, 2)]
_LOG2E = 1.4426950408889634


def _kernel(batch, heads, seq, dim, causal, dtype, block_M, block_N, num_stages, threads):
    import tilelang.language as T

    shape = (batch, heads, seq, dim)
    scale = spec.softmax_scale(dim) * _LOG2E  # softmax through exp2
    neg_inf = -T.infinity("float32")

    @T.prim_func
    def attention(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                  O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_s = T.alloc_shared((block_M, dim), dtype)
            K_s = T.alloc_shared((block_N, dim), dtype)
            V_s = T.alloc_shared((block_N, dim), dtype)
            O_s = T.alloc_shared((block_M, dim), dtype)
            S = T.alloc_fragment((block_M, block_N), "float32")
            P = T.alloc_fragment((block_M, block_N), dtype)
            acc = T.alloc_fragment((block_M, dim), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            m_prev = T.alloc_fragment((block_M,), "float32")
            alpha = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            total = T.alloc_fragment((block_M,), "float32")

            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], Q_s)
            T.fill(acc, 0)
            T.fill(total, 0)
            T.fill(m, neg_inf)
            steps = (T.min(T.ceildiv(seq, block_N), T.ceildiv((bx + 1) * block_M, block_N)) if causal
                     else T.ceildiv(seq, block_N))
            for k in T.Pipelined(steps, num_stages=num_stages):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], K_s)
                for i, j in T.Parallel(block_M, block_N):  # T.gemm accumulates: start from the mask
                    keep = k * block_N + j < seq
                    if causal:
                        keep = keep and (bx * block_M + i >= k * block_N + j)
                    S[i, j] = T.if_then_else(keep, 0, neg_inf)
                T.gemm(Q_s, K_s, S, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(S, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    alpha[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, dim):
                    acc[i, j] *= alpha[i]
                for i, j in T.Parallel(block_M, block_N):
                    S[i, j] = T.exp2(S[i, j] * scale - m[i] * scale)
                T.reduce_sum(S, row_sum, dim=1)
                for i in T.Parallel(block_M):
                    total[i] = total[i] * alpha[i] + row_sum[i]
                T.copy(S, P)
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], V_s)
                T.gemm(P, V_s, acc, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc[i, j] /= total[i]
            T.copy(acc, O_s)
            T.copy(O_s, O[bz, by, bx * block_M:(bx + 1) * block_M, :])

    return attention


def _func(workload, dtype):
    return _kernel(workload["batch"], workload["heads"], workload["seq"], workload["head_dim"], workload["causal"],
                   dtype, **_CONFIG)


def _tuning_program(batch, heads, seq, dim, causal, dtype):
    def attention_program(block_M=128, block_N=64, num_stages=2, threads=256):
        return _kernel(batch, heads, seq, dim, causal, dtype, block_M, block_N, num_stages, threads)

    return attention_program


def build(workload, dtype, device, variant):
    import tilelang

    if not device.is_gpu:
        raise Unsupported("no CPU implementation of flash attention in TileLang (shared memory, T.gemm)")
    if dtype == "float32":
        raise Unsupported("the tensor-core kernel takes fp16/bf16 inputs")
    target = aot.tilelang_target(device)
    if variant == "tuned":
        program = _tuning_program(workload["batch"], workload["heads"], workload["seq"], workload["head_dim"],
                                  workload["causal"], dtype)
        kernel, record = tune.tilelang_autotune(program, _TUNE_SPACE, target)
        config = dict(record, target=target)
    else:
        kernel = tilelang.compile(_func(workload, dtype), target=target)
        config = dict(_CONFIG, target=target)

    def attention(q, k, v, out):
        kernel(q, k, v, out)

    return Built(attention, config)


def compile_for(workload, dtype, device, variant):
    if dtype == "float32":
        raise Unsupported("the tensor-core kernel takes fp16/bf16 inputs")
    return aot.tilelang_compile_for(_func(workload, dtype), device, _CONFIG)
