"""TileLang: one program per token (batch, position), which rotates all of that token's q heads, then its k heads,
straight from global memory: T.Parallel over (heads, head_dim / 2) gives each thread consecutive dimensions of a
head (vectorised loads), both halves x1, x2 of the head and the token's cos and sin are read in fp32, and
x1 * cos1 - x2 * sin1, x2 * cos2 + x1 * sin2 written into q's or k's slice of `out`. GPU only: there is no CPU
implementation (the coverage grid shows that gap)."""
from opmatrix.kit import Built, Unsupported, aot

_THREADS = 128


def _kernel(batch, heads, kv_heads, seq, dim, dtype, threads):
    import tilelang.language as T

    half = dim // 2
    total = heads + kv_heads
    f32 = "float32"

    @T.prim_func
    def rope(Q: T.Tensor((batch, heads, seq, dim), dtype), K: T.Tensor((batch, kv_heads, seq, dim), dtype),
             C: T.Tensor((batch, seq, dim), dtype), S: T.Tensor((batch, seq, dim), dtype),
             O: T.Tensor((batch, total, seq, dim), dtype)):
        with T.Kernel(seq, batch, threads=threads) as (bs, bb):
            for h, j in T.Parallel(heads, half):
                x1 = T.cast(Q[bb, h, bs, j], f32)
                x2 = T.cast(Q[bb, h, bs, j + half], f32)
                O[bb, h, bs, j] = T.cast(x1 * T.cast(C[bb, bs, j], f32) - x2 * T.cast(S[bb, bs, j], f32), dtype)
                O[bb, h, bs, j + half] = T.cast(
                    x2 * T.cast(C[bb, bs, j + half], f32) + x1 * T.cast(S[bb, bs, j + half], f32), dtype)
            for h, j in T.Parallel(kv_heads, half):
                x1 = T.cast(K[bb, h, bs, j], f32)
                x2 = T.cast(K[bb, h, bs, j + half], f32)
                O[bb, heads + h, bs, j] = T.cast(
                    x1 * T.cast(C[bb, bs, j], f32) - x2 * T.cast(S[bb, bs, j], f32), dtype)
                O[bb, heads + h, bs, j + half] = T.cast(
                    x2 * T.cast(C[bb, bs, j + half], f32) + x1 * T.cast(S[bb, bs, j + half], f32), dtype)

    return rope


def _func(workload, dtype):
    if workload["head_dim"] % 2:
        raise Unsupported("rotary embedding needs an even head_dim")
    return _kernel(workload["batch"], workload["heads"], workload["kv_heads"], workload["seq"],
                   workload["head_dim"], dtype, _THREADS)


def build(workload, dtype, device, variant):
    kernel, config = aot.tilelang_gpu_build(device, "rope", lambda: {"threads": _THREADS},
                                            lambda config: _func(workload, dtype))

    def rope(q, k, cos, sin, out):
        kernel(q, k, cos, sin, out)

    return Built(rope, config)


def compile_for(workload, dtype, device, variant):
    return aot.tilelang_compile_for(_func(workload, dtype), device, {"threads": _THREADS})
