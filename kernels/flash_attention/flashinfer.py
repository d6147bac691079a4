"""FlashInfer's prefill attention (flashinfer.prefill.single_prefill_with_kv_cache), called as a library, one call
per batch element: this spec's q, k, v are (batch, heads, seq, head_dim); each element's k and v go in as FlashInfer's
"HND" layout (heads, seq, dim) without a copy, its q as a strided (seq, heads, dim) view, and the (seq, heads, dim)
output it allocates is copied into `out` (recorded in the config: a model in FlashInfer's own layout, or its batch
wrappers, would skip both). fp16 and bf16 only (its attention kernels have no fp32 instantiation)."""
from opmatrix.kit import Built, Unsupported, load_spec

spec = load_spec(__file__)


def build(workload, dtype, device, variant):
    import flashinfer

    if dtype not in ("float16", "bfloat16"):
        raise Unsupported(f"FlashInfer {flashinfer.__version__}'s prefill attention takes float16 and bfloat16 "
                          f"inputs, not {dtype}")
    causal, scale = workload["causal"], spec.softmax_scale(workload["head_dim"])

    def attention(q, k, v, out):
        for b in range(q.shape[0]):
            o = flashinfer.prefill.single_prefill_with_kv_cache(q[b].transpose(0, 1), k[b], v[b], causal=causal,
                                                                kv_layout="HND", sm_scale=scale)
            out[b].copy_(o.transpose(0, 1))

    return Built(attention, {"library": "flashinfer.prefill.single_prefill_with_kv_cache", "calls": workload["batch"],
                             "output_copy": True})
