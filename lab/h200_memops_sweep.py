"""Variants of the Triton add_rmsnorm and rope kernels at llama_prefill (bf16) on a GPU: GB/s against the 2 GiB
copy ceiling measured by the cell probe's own code (opmatrix.incell.ceilings: do_bench, L2 flushed, median),
beside a plain copy of the same number of bytes. Each variant is checked against the committed kernel's output
first.

    python3 lab/h200_memops_sweep.py          # from the project root, on a GPU host (torch, triton)

Issue "model loop", goal >= 90 % of copy bandwidth at prefill sizes: see reports/20261130-h200-model-llama/NOTES.md.
There, this sweep's first run timed rope's earlier token-major kernel as the committed one and the head-major
layout as the variants; the head-major kernel has since been committed (reports/20261130-h200-rope)."""
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path[:0] = [".", str(Path(__file__).parent)]
from opmatrix import paths  # noqa: E402 - the project root is on the path above
from opmatrix.incell import ceilings, plugins  # noqa: E402
from h200_sweeps import H200, burst_median_ms  # noqa: E402 - this file's folder


def bench(fn):
    return burst_median_ms(fn, warmup_ms=25, rep_ms=200)

ceil = ceilings.measure_ceilings("cuda", [])["copy_gbps"]  # the cell probe's own 2 GiB copy ceiling
print(f"copy ceiling {ceil:.0f} GB/s")

# ---------------- add_rmsnorm ----------------
T, H = 8192, 2048
dt = torch.bfloat16
x = torch.randn(T, H, device="cuda", dtype=dt); r = torch.randn(T, H, device="cuda", dtype=dt)
w = torch.randn(H, device="cuda", dtype=dt); out = torch.empty(2, T, H, device="cuda", dtype=dt)
nbytes = 2 * (4 * T * H + H)
ref = plugins.load_impl(paths.BUILTIN_KERNELS, "add_rmsnorm", "triton").build({"tokens": T, "hidden": H}, "bfloat16", H200,
                                                                        "default").fn
ref(x, r, w, out); expect = out.clone()

@triton.jit
def ar_rows(x_ptr, r_ptr, w_ptr, out_ptr, tokens, hidden, eps, BLOCK: tl.constexpr, ROWS: tl.constexpr,
            EVICT: tl.constexpr):
    row0 = tl.program_id(0).to(tl.int64) * ROWS
    rows = row0 + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows < tokens)[:, None] & (cols < hidden)[None, :]
    offs = rows[:, None] * hidden + cols[None, :]
    if EVICT:
        h = (tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
             + tl.load(r_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32))
    else:
        h = (tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
             + tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float32))
    wv = tl.load(w_ptr + cols, mask=cols < hidden, other=0.0).to(tl.float32)
    dtype = out_ptr.dtype.element_ty
    if EVICT:
        tl.store(out_ptr + tokens * hidden + offs, h.to(dtype), mask=mask, cache_modifier=".cs")
    else:
        tl.store(out_ptr + tokens * hidden + offs, h.to(dtype), mask=mask)
    scale = tl.rsqrt(tl.sum(h * h, axis=1) / hidden + eps)
    y = (h * scale[:, None] * wv[None, :]).to(dtype)
    if EVICT:
        tl.store(out_ptr + offs, y, mask=mask, cache_modifier=".cs")
    else:
        tl.store(out_ptr + offs, y, mask=mask)

def report(name, ms):
    print(f"  {name:40s} {ms*1e3:7.2f} us  {nbytes/(ms/1e3)/1e9:6.0f} GB/s  {100*nbytes/(ms/1e3)/1e9/ceil:5.1f} %",
          flush=True)


def sweep(configs, launch, out, expect):
    """Each config (a dict of launch keywords): checked against `expect`, then timed."""
    for cfg in configs:
        label = " ".join(f"{k}={v}" for k, v in cfg.items())
        try:
            out.zero_()
            launch(**cfg)
            ok = torch.allclose(out.float(), expect.float(), atol=2e-2, rtol=2e-2)
            report(f"{label} ok={ok}", bench(lambda: launch(**cfg)))
        except Exception as e:  # a configuration the compiler refuses: say so, go on
            print(f"  {label} failed: {type(e).__name__} {str(e)[:100]}")


print("add_rmsnorm llama_prefill", nbytes / 1e6, "MB")
report("committed kernel", bench(lambda: ref(x, r, w, out)))
cp_s = torch.empty(nbytes // 8, device="cuda", dtype=torch.float32); cp_d = torch.empty_like(cp_s)
ms = bench(lambda: cp_d.copy_(cp_s))  # nbytes / 2 read and nbytes / 2 written
report("copy of the same bytes", ms)
sweep([dict(ROWS=rows, num_warps=warps, EVICT=evict) for rows in (1, 2, 4) for warps in (4, 8, 16)
       for evict in (0, 1)],
      lambda **cfg: ar_rows[(triton.cdiv(T, cfg["ROWS"]),)](x, r, w, out, T, H, 1e-6, BLOCK=2048, **cfg),
      out, expect)
del x, r, out, cp_s, cp_d

# ---------------- rope: the committed head-major kernel over its block of positions and warps ----------------
B, NH, KV, S, HD = 4, 16, 16, 2048, 128
q = torch.randn(B, NH, S, HD, device="cuda", dtype=dt); k = torch.randn(B, KV, S, HD, device="cuda", dtype=dt)
cos = torch.randn(B, S, HD, device="cuda", dtype=dt); sin = torch.randn(B, S, HD, device="cuda", dtype=dt)
out = torch.empty(B, NH + KV, S, HD, device="cuda", dtype=dt)
nbytes = 2 * (2 * B * (NH + KV) * S * HD + 2 * B * S * HD)
rm = plugins.load_impl(paths.BUILTIN_KERNELS, "rope", "triton")
wl = {"batch": B, "heads": NH, "kv_heads": KV, "seq": S, "head_dim": HD}
rfn = rm.build(wl, "bfloat16", H200, "default").fn
rfn(q, k, cos, sin, out); expect = out.clone()
print("rope llama_prefill", nbytes / 1e6, "MB")
report("committed kernel", bench(lambda: rfn(q, k, cos, sin, out)))
sweep([dict(BLOCK_S=bs, num_warps=warps) for bs in (16, 32, 64, 128) for warps in (2, 4, 8)],
      lambda **cfg: rm._rope_kernel[(triton.cdiv(S, cfg["BLOCK_S"]), B * (NH + KV))](
          q, k, cos, sin, out, S, NH, KV, HALF=HD // 2, BLOCK_D=HD // 2, **cfg),
      out, expect)
