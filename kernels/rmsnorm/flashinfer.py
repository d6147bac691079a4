"""FlashInfer's RMSNorm (flashinfer.norm.rmsnorm, writing into the given output), called as a library. Its norm
kernels are instantiated for fp16 and bf16 only (csrc/norm.cu dispatches DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP16): fp32
rows are refused with that reason. No compile-only build: FlashInfer JIT-compiles its CUDA sources with nvcc on the
first call on a GPU."""
from opmatrix.kit import Built, Unsupported, load_spec

spec = load_spec(__file__)


def build(workload, dtype, device, variant):
    import flashinfer

    if dtype not in ("float16", "bfloat16"):
        raise Unsupported(f"FlashInfer {flashinfer.__version__}'s RMSNorm is instantiated for float16 and bfloat16, "
                          f"not {dtype}")

    def rmsnorm(x, weight, out):
        flashinfer.norm.rmsnorm(x, weight, spec.EPS, out=out)

    return Built(rmsnorm, {"library": "flashinfer.norm.rmsnorm"})
