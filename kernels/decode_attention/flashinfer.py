"""FlashInfer's decode attention (flashinfer.decode.single_decode_with_kv_cache), called as a library, one call per
sequence: its q is (heads, head_dim), its cache this spec's (kv_heads, kv_len, head_dim) slice as FlashInfer's
"HND" layout, read without a copy; grouped-query heads are FlashInfer's own. The (heads, head_dim) output it
allocates is copied into `out` (in the config: a server calling its batch wrappers on a paged cache would skip
it). fp16 and bf16 only (its decode kernels have no fp32 instantiation)."""
from opmatrix.kit import Built, Unsupported, load_spec

spec = load_spec(__file__)


def build(workload, dtype, device, variant):
    import flashinfer

    if dtype not in ("float16", "bfloat16"):
        raise Unsupported(f"FlashInfer {flashinfer.__version__}'s decode attention takes float16 and bfloat16 "
                          f"inputs, not {dtype}")
    scale = spec.softmax_scale(workload["head_dim"])

    def attention(q, k, v, out):
        for b in range(q.shape[0]):
            o = flashinfer.decode.single_decode_with_kv_cache(q[b, :, 0], k[b], v[b], kv_layout="HND",
                                                              sm_scale=scale)
            out[b, :, 0].copy_(o)

    return Built(attention, {"library": "flashinfer.decode.single_decode_with_kv_cache", "calls": workload["batch"],
                             "output_copy": True})
