"""quack's RMSNorm forward, called as the library ships it: the CuTe DSL kernel with its analytical configuration
(threads per row, cluster size by hidden size), through quack.rmsnorm._rmsnorm_fwd, the entry that writes into a
given output (the public rmsnorm_fwd allocates one per call, which a timed row would count). NVIDIA sm_90 and later; compile-only
builds compile the library's own kernel class (quack.rmsnorm.RMSNorm) over fake tensors, as its `_compile_rmsnorm_fwd`
does, for sm_90a / sm_100a."""
import math

from opmatrix.kit import Built, Unsupported, cute_dsl, load_spec

spec = load_spec(__file__)
_MIN_SM = 90


def _check(workload) -> None:
    if workload["hidden"] % 8:  # quack asserts 16-byte rows for its vectorised copies
        raise Unsupported(f"quack's RMSNorm copies rows in 16-byte vectors: hidden {workload['hidden']} is not a "
                          "multiple of 8")


def build(workload, dtype, device, variant):
    from quack.rmsnorm import _rmsnorm_fwd

    _check(workload)

    def rmsnorm(x, weight, out):
        _rmsnorm_fwd(x, weight, out, eps=spec.EPS)

    return Built(rmsnorm, {"library": "quack.rmsnorm._rmsnorm_fwd"})


def compile_for(workload, dtype, device, variant):
    import cutlass
    import cutlass.cute as cute
    from quack.compile_utils import make_fake_tensor
    from quack.rmsnorm import RMSNorm

    _check(workload)
    hidden, dt = workload["hidden"], cute_dsl.dtype(dtype)
    div = math.gcd(hidden, 128 // dt.width)
    rows = cute.sym_int()
    x, out, weight = make_fake_tensor(dt, (rows, hidden), div), make_fake_tensor(dt, (rows, hidden), div), \
        make_fake_tensor(dt, (hidden,), div)
    kernel = RMSNorm(dt, hidden)
    config = {"threads": kernel.config.num_threads, "threads_per_row": kernel.config.threads_per_row,
              "cluster_n": kernel.config.cluster_n}
    return cute_dsl.compile_for(kernel, (x, weight, None, None, out, None, None, None, cutlass.Float32(0),
                                         cute.runtime.make_fake_stream(use_tvm_ffi_env_stream=True)),
                                device, config, "quack", options="--enable-tvm-ffi", min_sm=_MIN_SM)
