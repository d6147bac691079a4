"""Variants of the Triton add_rmsnorm and rope kernels at llama_prefill (bf16) on a GPU: GB/s against the 2 GiB
copy ceiling measured as opmatrix's cell probe does (triton's do_bench, L2 flushed, median), beside a plain copy
of the same number of bytes. Each variant is checked against the committed kernel's output first.

    python3 tools/h200_memops_sweep.py          # from the project root, on a GPU host (torch, triton)

Issue "model loop", goal >= 90 % of copy bandwidth at prefill sizes: see reports/20261130-h200-model-llama/NOTES.md."""
import sys
import torch
import triton
import triton.language as tl
from triton.testing import do_bench

sys.path.insert(0, ".")
import importlib.util

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

def bench(fn):
    return do_bench(fn, warmup=25, rep=200, return_mode="median")

count = 2048 * 1024 * 1024 // 4
src = torch.ones(count, device="cuda"); dst = torch.empty_like(src)
ceil = 2 * count * 4 / (bench(lambda: dst.copy_(src)) / 1e3) / 1e9
del src, dst
print(f"copy ceiling {ceil:.0f} GB/s")

# ---------------- add_rmsnorm ----------------
T, H = 8192, 2048
dt = torch.bfloat16
x = torch.randn(T, H, device="cuda", dtype=dt); r = torch.randn(T, H, device="cuda", dtype=dt)
w = torch.randn(H, device="cuda", dtype=dt); out = torch.empty(2, T, H, device="cuda", dtype=dt)
nbytes = 2 * (4 * T * H + H)
ref_mod = load("kernels/add_rmsnorm/triton.py", "ar")
class D: is_gpu = True; vendor = "nvidia"
ref = ref_mod.build({"tokens": T, "hidden": H}, "bfloat16", D, "default").fn
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

print("add_rmsnorm llama_prefill", nbytes / 1e6, "MB")
report("current", bench(lambda: ref(x, r, w, out)))
cp_s = torch.empty(nbytes // 8, device="cuda", dtype=torch.float32); cp_d = torch.empty_like(cp_s)
ms = bench(lambda: cp_d.copy_(cp_s))  # nbytes read and nbytes written
print(f"  {'copy of the same bytes':40s} {ms*1e3:7.2f} us  {2*nbytes/(ms/1e3)/1e9:6.0f} GB/s  "
      f"{100*2*nbytes/(ms/1e3)/1e9/ceil:5.1f} %")
for rows in (1, 2, 4):
    for warps in (4, 8, 16):
        for evict in (0, 1):
            def f(rows=rows, warps=warps, evict=evict):
                ar_rows[(triton.cdiv(T, rows),)](x, r, w, out, T, H, 1e-6, BLOCK=2048, ROWS=rows, EVICT=evict,
                                                 num_warps=warps)
            try:
                out.zero_(); f()
                ok = torch.allclose(out.float(), expect.float(), atol=2e-2, rtol=2e-2)
                report(f"rows={rows} warps={warps} evict={evict} ok={ok}", bench(f))
            except Exception as e:
                print("  fail", rows, warps, evict, type(e).__name__, str(e)[:100])
del x, r, out, cp_s, cp_d

# ---------------- rope ----------------
B, NH, KV, S, HD = 4, 16, 16, 2048, 128
q = torch.randn(B, NH, S, HD, device="cuda", dtype=dt); k = torch.randn(B, KV, S, HD, device="cuda", dtype=dt)
cos = torch.randn(B, S, HD, device="cuda", dtype=dt); sin = torch.randn(B, S, HD, device="cuda", dtype=dt)
out = torch.empty(B, NH + KV, S, HD, device="cuda", dtype=dt)
nbytes = 2 * (2 * B * (NH + KV) * S * HD + 2 * B * S * HD)
rm = load("kernels/rope/triton.py", "rp")
wl = {"batch": B, "heads": NH, "kv_heads": KV, "seq": S, "head_dim": HD}
rfn = rm.build(wl, "bfloat16", D, "default").fn
rfn(q, k, cos, sin, out); expect = out.clone()

@triton.jit
def rope_hm(q_ptr, k_ptr, cos_ptr, sin_ptr, out_ptr, seq, heads, kv_heads,
            HALF: tl.constexpr, BLOCK_S: tl.constexpr, EVICT: tl.constexpr):
    pid_s = tl.program_id(0)
    bh = tl.program_id(1)
    total = heads + kv_heads
    b = bh // total
    h = bh % total
    pos = (pid_s * BLOCK_S + tl.arange(0, BLOCK_S)).to(tl.int64)
    dims = tl.arange(0, HALF)
    mask = (pos < seq)[:, None]
    trow = (b * seq + pos)[:, None] * (2 * HALF) + dims[None, :]
    c1 = tl.load(cos_ptr + trow, mask=mask, other=0.0).to(tl.float32)
    c2 = tl.load(cos_ptr + trow + HALF, mask=mask, other=0.0).to(tl.float32)
    s1 = tl.load(sin_ptr + trow, mask=mask, other=0.0).to(tl.float32)
    s2 = tl.load(sin_ptr + trow + HALF, mask=mask, other=0.0).to(tl.float32)
    if h < heads:
        src = q_ptr + ((b * heads + h) * seq + pos)[:, None] * (2 * HALF) + dims[None, :]
    else:
        src = k_ptr + ((b * kv_heads + h - heads) * seq + pos)[:, None] * (2 * HALF) + dims[None, :]
    if EVICT:
        x1 = tl.load(src, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        x2 = tl.load(src + HALF, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    else:
        x1 = tl.load(src, mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(src + HALF, mask=mask, other=0.0).to(tl.float32)
    dst = out_ptr + ((b * total + h) * seq + pos)[:, None] * (2 * HALF) + dims[None, :]
    dtype = out_ptr.dtype.element_ty
    if EVICT:
        tl.store(dst, (x1 * c1 - x2 * s1).to(dtype), mask=mask, cache_modifier=".cs")
        tl.store(dst + HALF, (x2 * c2 + x1 * s2).to(dtype), mask=mask, cache_modifier=".cs")
    else:
        tl.store(dst, (x1 * c1 - x2 * s1).to(dtype), mask=mask)
        tl.store(dst + HALF, (x2 * c2 + x1 * s2).to(dtype), mask=mask)

print("rope llama_prefill", nbytes / 1e6, "MB")
report("current", bench(lambda: rfn(q, k, cos, sin, out)))
for bs in (16, 32, 64, 128):
    for warps in (2, 4, 8):
        for evict in (0, 1):
            def g(bs=bs, warps=warps, evict=evict):
                rope_hm[(triton.cdiv(S, bs), B * (NH + KV))](q, k, cos, sin, out, S, NH, KV, HALF=HD // 2,
                                                             BLOCK_S=bs, EVICT=evict, num_warps=warps)
            try:
                out.zero_(); g()
                ok = torch.allclose(out.float(), expect.float(), atol=2e-2, rtol=2e-2)
                report(f"head-major bs={bs} warps={warps} evict={evict} ok={ok}", bench(g))
            except Exception as e:
                print("  fail", bs, warps, evict, type(e).__name__, str(e)[:100])
