"""Is an output right? Two checks against the float64 reference, on every trial's fresh seeded inputs.

1. The norm ratio `rel_err = ||out - ref|| / ||ref||` <= `spec.tolerance(dtype)`: the output as a whole.
2. Element-wise, no element far off: `|out - ref| <= atol * rms_row(ref) + rtol * |ref|`, where rms_row is the
   root-mean-square of the element's row (last dimension) of the reference, and `(atol, rtol)` come from the
   spec's `elementwise_tolerance(dtype)` or the dtype's default below. The norm ratio alone lets a few wrong
   elements through: 1 % of the elements off by 1 % gives rel_err 1.05e-3 < 2e-3 in fp16 (bf16: 1.95e-3 < 1e-2).
   A row records how many elements broke the bound in the worst trial (`bad_elements`) and where the worst of
   them is (`worst_index`).

Why rtol: a correct kernel rounds its fp32 result to the dtype, <= u |ref| (unit roundoff u: fp16 2^-11, bf16
2^-8). Why atol, and in units of the row's rms: an error that is not proportional to the element (accumulation
order, an intermediate rounded to the dtype such as attention's probabilities before P @ V) scales with the terms
summed into it, that is with its row: a GEMM's rows grow with sqrt(K); a causal attention's first query rows
average a few rows of V and its last ones thousands, ~50x apart in magnitude, which one rms of the whole output
cannot follow (on an H200 it needed atol 12.7 u in whole-output rms, 2.6 u in row rms).

Defaults, for kernels that accumulate in fp32 and round their result once (gemm_relu, rmsnorm):
- fp16 / bf16: rtol = 2 u: the element's own rounding (<= u) plus one more rounding of a factor of it (eager
  rmsnorm in older torch rounds x * rsqrt(...) to the dtype before multiplying by the weight: <= 2 u + u^2);
  atol = 0.5 u: fp32 accumulation order, fp16 subnormal outputs, the u^2 of a double rounding.
- fp32: rtol 1e-5, atol 5e-5: accumulation order dominates, not output rounding.
Calibration (3 seeded trials; "needs" = the smallest atol, in u x rms_row, at rtol 2 u):
- H200, torch 2.11 / triton 3.6, every GPU workload of the committed matrices: gemm_relu (torch = cuBLAS,
  blaslt = cuBLASLt, triton) fp16 needs <= 0.075 u, bf16 <= 0.008 u, and no element larger than the output's rms
  is off by more than 1.05 u; rmsnorm (torch, triton) <= 6e-5 u. TileLang and CUTLASS round an fp32 accumulator once,
  like these (their norm ratios in the committed H200 reports equal torch's to three digits).
- CPU, torch 2.13, every committed CPU workload and backend (float32; torch, torch.compile, tilelang[cpu], the
  Triton interpreter): fp32 needs <= 6.7e-6 x rms_row; fp16 / bf16 through torch, torch.compile and the Triton
  interpreter: pure rounding (<= 1 u), except the interpreter's bf16 stores, which truncate (< 2 u).
Special values: where the spec's inputs hold inf or NaN (a kind of its NONFINITE_KINDS, opmatrix.incell.contents),
the fp64 reference defines what is expected there: an element where the reference is NaN must be NaN, one where it
is +-inf an inf of the same sign; anything else there is a bad element. Both checks above then run over the elements
where the reference is finite (the row's rms too), on which a NaN or an inf is a bad element as ever: an output
never written (the NaN poison) still fails wherever the reference is finite.
What it catches: a 1 % error is 20 u in fp16, caught on every element not within 0.03 rms_row of zero; in bf16 it
is 2.6 u, and a bf16 value is resolved only to 0.4-0.8 %: the check catches the elements on which the 1 % survives
rounding to bf16 (a third of them on randn data), which fails the row all the same.
Stdlib only at import; torch arrives with the tensors.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from opmatrix.incell.contract import PluginError

UNIT_ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 2.0 ** -24}
ELEMENTWISE = {  # dtype -> (atol in units of the row's rms, rtol); see the module docstring
    "float16": (0.5 * UNIT_ROUNDOFF["float16"], 2 * UNIT_ROUNDOFF["float16"]),
    "bfloat16": (0.5 * UNIT_ROUNDOFF["bfloat16"], 2 * UNIT_ROUNDOFF["bfloat16"]),
    "float32": (5e-5, 1e-5),
}


def default_elementwise_tolerance(dtype: str) -> tuple[float, float]:
    """(atol in units of the row's rms, rtol) for a kernel that accumulates in fp32 and rounds its result once."""
    if dtype not in ELEMENTWISE:
        raise PluginError(f"no default element-wise tolerance for dtype {dtype!r} (known: {', '.join(ELEMENTWISE)});"
                          " the kernel's spec.py must define elementwise_tolerance(dtype) -> (atol, rtol)")
    return ELEMENTWISE[dtype]


def elementwise_tolerance(spec, dtype: str) -> tuple[float, float]:
    """The spec's `elementwise_tolerance(dtype)` if it has one (kernels with rounded intermediates) and it does
    not answer None, else the dtype's default."""
    hook = getattr(spec, "elementwise_tolerance", None)
    value = None if hook is None else hook(dtype)
    if value is None:
        return default_elementwise_tolerance(dtype)
    if not (isinstance(value, tuple) and len(value) == 2 and all(_non_negative(v) for v in value)):
        raise PluginError(f"{spec.__file__}: elementwise_tolerance({dtype!r}) must return (atol, rtol), two "
                          f"non-negative numbers, or None for the dtype's default; got {value!r}")
    return float(value[0]), float(value[1])


def _non_negative(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def rel_err(got, ref, special=None) -> float:
    """||got - ref|| / ||ref|| in float64: NaN when `got` has a non-finite element (an unwritten, poisoned one).
    `special`: the mask of the reference's non-finite elements (None where it has none), left out of both norms."""
    if special is not None:
        kept = ~special
        got, ref = got[kept], ref[kept]
    diff = float((got.double() - ref).norm())
    scale = float(ref.norm())
    if scale == 0.0:
        return 0.0 if diff == 0.0 else math.inf
    return diff / scale


def special_values(ref, finite: bool | None = None):
    """The mask of the reference's non-finite elements, or None where it is finite everywhere. `finite`: whether it
    is, where the caller knows already (the judge learnt it when it checked the reference): then no pass over it."""
    if finite:
        return None
    import torch

    special = ~torch.isfinite(ref)
    return special if finite is False or bool(special.any()) else None


def same_special(got, ref):
    """Where `got` holds the reference's own special value: NaN for NaN, an inf of the same sign for an inf."""
    return (got.isnan() & ref.isnan()) | (got == ref)


@dataclass(frozen=True)
class Violations:
    """The elements of one output outside |out - ref| <= atol * rms_row(ref) + rtol * |ref|, and the worst of them
    (the largest error relative to its bound; a NaN is worse than any number)."""

    count: int
    total: int
    index: tuple[int, ...] = ()
    got: float = 0.0
    ref: float = 0.0

    @property
    def where(self) -> str:
        return "(" + ", ".join(map(str, self.index)) + ("," if len(self.index) == 1 else "") + ")"


def violations(got, ref, atol: float, rtol: float, special=None) -> Violations:
    """The elements outside the bound. `special`: the mask of the reference's non-finite elements (None where it has
    none): there the output must hold the same special value, and the bound is taken over the finite elements."""
    import torch

    ref, got64 = ref.double(), got.double()
    held = ref if special is None else ref.masked_fill(special, 0.0)
    diff = (got64 - held).abs()
    bound = atol * rms_row(held) + rtol * held.abs()
    bad = ~(diff <= bound)  # NaN compares false: an unwritten or non-finite element is bad
    if special is not None:
        bad = torch.where(special, ~same_special(got64, ref), bad)
    count = int(bad.sum())
    if count == 0:
        return Violations(0, ref.numel())
    excess = torch.nan_to_num(diff / bound, nan=math.inf, posinf=math.inf)
    if special is not None:
        excess = excess.masked_fill(special, math.inf)  # a special value missed is as bad as a NaN
    flat = int(torch.where(bad, excess, torch.full_like(excess, -1.0)).flatten().argmax())
    index = _unravel(flat, tuple(ref.shape))
    return Violations(count, ref.numel(), index, float(got[index]), float(ref[index]))


def rms_row(ref):
    """The root-mean-square of each row (the last dimension) of the reference, broadcastable against it."""
    return ref.pow(2).mean(-1, keepdim=True).sqrt() if ref.dim() else ref.abs()


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        flat, rest = divmod(flat, size)
        index.append(rest)
    return tuple(reversed(index))


@dataclass
class Verdict:
    """The worst of every trial so far: the largest norm ratio (NaN sticks) and the trial with the most elements
    out of bounds."""

    tolerance: float
    atol: float
    rtol: float
    rel_err: float = 0.0
    worst: Violations | None = None
    trials: int = 0
    worst_kind: str = ""  # the kind of inputs of the trial with the most bad elements ('' where not told)
    rel_err_kind: str = ""  # and of the trial with the largest norm ratio

    def add(self, got, ref, finite: bool | None = None, kind: str = "") -> None:
        """One trial's output against its reference. `finite`: whether the reference is finite everywhere, where
        the caller knows (None: found out here); `kind`: the kind of its inputs, named where the worst is."""
        if tuple(got.shape) != tuple(ref.shape):
            raise ShapeMismatch(f"the output has shape {tuple(got.shape)}, the reference {tuple(ref.shape)}")
        special = special_values(ref, finite)
        err = rel_err(got, ref, special)
        if not math.isfinite(err) or (math.isfinite(self.rel_err) and err > self.rel_err):
            self.rel_err_kind = kind
        self.rel_err = err if not math.isfinite(err) else max(self.rel_err, err)
        found = violations(got, ref, self.atol, self.rtol, special)
        if self.worst is None or found.count > self.worst.count:
            self.worst, self.worst_kind = found, kind
        self.trials += 1

    @property
    def finite(self) -> bool:
        return math.isfinite(self.rel_err)

    @property
    def bad_elements(self) -> int:
        return self.worst.count if self.worst else 0

    @property
    def passed(self) -> bool:
        return self.finite and self.rel_err <= self.tolerance and self.bad_elements == 0

    def explain(self) -> str:
        """Why the output is wrong, with the numbers a reader needs to find the element."""
        norm = not self.finite or self.rel_err > self.tolerance
        kinds = {kind for kind, failed in ((self.rel_err_kind, norm), (self.worst_kind, self.bad_elements)) if failed}
        once = len(kinds) == 1  # the inputs' kind, named once where both findings were on the same kind
        parts = []
        if norm:
            parts.append(f"relative error {self.rel_err:.3g} > tolerance {self.tolerance:.3g}"
                         + ("" if once else _on(self.rel_err_kind)))
        if self.bad_elements:
            w = self.worst
            parts.append(f"{w.count} of {w.total} elements outside |out - ref| <= {self.atol:.3g}*rms_row(ref) + "
                         f"{self.rtol:.3g}*|ref|{'' if once else _on(self.worst_kind)} (worst at {w.where}: out "
                         f"{w.got:.6g}, ref {w.ref:.6g})")
        return "; ".join(parts) + (_on(kinds.pop()) if once else "") + (
            f" (worst of {self.trials} trials with fresh inputs; NaN = unwritten or non-finite)")


def _on(kind: str) -> str:
    return f" on inputs of kind {kind!r}" if kind else ""


class ShapeMismatch(ValueError):
    """The implementation returned an output whose shape is not the reference's."""
