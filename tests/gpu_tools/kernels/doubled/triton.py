"""Triton, one element per lane. `default`: masked, honest. `past_end` (planted, tests/gpu_tools/README.md): the same
kernel also loads the _PAST elements after the end of x, unmasked, and folds them into its result through a bit
pattern (_SENTINEL) that neither a normal input nor the judge's NaN poison holds: the outputs stay right, the reads
are out of bounds. A GPU contestant only (on the CPU, Triton's interpreter would read host memory past the array)."""
import triton
import triton.language as tl

from opmatrix.kit import Built, Unsupported

VARIANTS = ("default", "past_end")
_PAST = 4096  # elements read past x's end by `past_end`: 16 KiB of float32
_SENTINEL = 0x7F7F1234  # a float32 bit pattern (a finite 3.4e38) no input of the spec's draws


@triton.jit
def _doubled(x_ptr, y_ptr, n, PAST: tl.constexpr, SENTINEL: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = i < n
    y = tl.load(x_ptr + i, mask=inside, other=0.0) * 2
    if PAST > 0:
        beyond = tl.load(x_ptr + n + (i % PAST), mask=inside)  # past the end of x
        y = tl.where(beyond.to(tl.int32, bitcast=True) == SENTINEL, y + 1.0, y)
    tl.store(y_ptr + i, y, mask=inside)


def build(workload, dtype, device, variant):
    if variant == "past_end" and not device.is_gpu:
        raise Unsupported("`past_end` is a GPU contestant (planted for compute-sanitizer): on the CPU, Triton's "
                          "interpreter would read host memory past the array")
    past = _PAST if variant == "past_end" else 0
    n = workload["n"]
    block = 1024
    grid = (triton.cdiv(n, block),)

    def doubled(x, out):
        _doubled[grid](x, out, n, PAST=past, SENTINEL=_SENTINEL, BLOCK=block)

    return Built(doubled, config={"BLOCK": block, "past": past})
