"""The device's measured ceilings, once per cell: a large matrix product per dtype (the arithmetic ceiling) and a
large device-to-device copy (the memory ceiling, bytes read + written). Datasheet rates are leads; these are what
this device, driver and library reach today, timed the same way as every kernel (opmatrix.incell.measure). Each result
is then placed against the roofline (opmatrix.core.metrics).

Measured by opmatrix.incell.cell_probe inside the cell's environment."""
from __future__ import annotations


from opmatrix.incell import measure

# CPU: 1024^3 keeps a half-precision matmul (emulated on most CPUs) to a second or so; 256 MiB is past any L3.
SIZES = {"cpu": {"matmul": 1024, "copy_mib": 256}, "cuda": {"matmul": 8192, "copy_mib": 2048}}


def measure_ceilings(torch_device: str, dtypes: list[str], warmup_ms: float = 25, rep_ms: float = 200) -> dict:
    import torch

    size = SIZES["cpu" if torch_device == "cpu" else "cuda"]
    n = size["matmul"]
    tflops = {}
    for dtype in dtypes:
        dt = getattr(torch, dtype)
        a = torch.randn(n, n, device=torch_device).to(dt)
        b = torch.randn(n, n, device=torch_device).to(dt)
        c = torch.empty(n, n, device=torch_device, dtype=dt)
        timing = measure.time_callable(lambda: torch.matmul(a, b, out=c), torch_device, warmup_ms, rep_ms)
        tflops[dtype] = 2.0 * n ** 3 / (timing.median_ms / 1e3) / 1e12
        del a, b, c
    count = size["copy_mib"] * 1024 * 1024 // 4
    src = torch.ones(count, device=torch_device)  # the values do not matter to a copy; randn costs a CPU cell 0.4 s
    dst = torch.empty_like(src)
    timing = measure.time_callable(lambda: dst.copy_(src), torch_device, warmup_ms, rep_ms)
    return {"tflops": tflops, "copy_gbps": 2.0 * src.numel() * 4 / (timing.median_ms / 1e3) / 1e9,
            "how": f"matmul {n}^3 per dtype, copy {size['copy_mib']} MiB (read+write), {timing.timer}"}
