#!/usr/bin/env bash
# Record what Nsight Compute and compute-sanitizer print on a GPU host (issue 47: their parsers are tested on the CPU
# with these recordings): an honest torch rmsnorm call and a Triton kernel that reads past its input.
#   lab/capture_profiler_outputs.sh OUTDIR
set -uo pipefail
out=${1:?OUTDIR}
mkdir -p "$out"
cat > /tmp/honest.py <<'PY'
import torch
x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
w = torch.ones(4096, device="cuda", dtype=torch.bfloat16)
y = torch.nn.functional.rms_norm(x, (4096,), w)
torch.cuda.synchronize()
PY
cat > /tmp/oob.py <<'PY'
import torch, triton, triton.language as tl

@triton.jit
def past_the_end(x, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + i, tl.load(x + i + 4096) * 2, mask=i < n)  # reads 4096 elements past x's end

n = 1 << 20
x = torch.randn(n, device="cuda")
out = torch.empty(n, device="cuda")
past_the_end[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
torch.cuda.synchronize()
PY
{ nvidia-smi --query-gpu=name,driver_version --format=csv; ncu --version; compute-sanitizer --version; } > "$out/versions.txt" 2>&1
timeout 100 ncu --clock-control none --csv --page details --section SpeedOfLight --section Occupancy \
  --section LaunchStats --section WarpStateStats python3 /tmp/honest.py > "$out/ncu-details.csv" 2>&1
echo "rc=$?" >> "$out/ncu-details.csv"
for tool in memcheck initcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --print-limit 10 --error-exitcode 86 python3 /tmp/oob.py \
    > "$out/sanitizer-$tool-oob.txt" 2>&1; echo "rc=$?" >> "$out/sanitizer-$tool-oob.txt"
done
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 86 python3 /tmp/honest.py > "$out/sanitizer-memcheck-honest.txt" 2>&1
echo "rc=$?" >> "$out/sanitizer-memcheck-honest.txt"
ls -la "$out"
