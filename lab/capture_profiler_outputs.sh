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
for _ in range(2):
    y = torch.nn.functional.rms_norm(x, (4096,), w)
torch.cuda.synchronize()
PY
cat > /tmp/oob.py <<'PY'
import torch, triton, triton.language as tl

@triton.jit
def past_the_end(x, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + i, tl.load(x + i + 64) * 2, mask=i < n)  # reads 64 elements past x's end

n = 1 << 20
x = torch.randn(n, device="cuda")
out = torch.empty(n, device="cuda")
past_the_end[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
torch.cuda.synchronize()
PY
nvidia-smi --query-gpu=name,driver_version --format=csv > "$out/gpu.txt" 2>&1
ncu --version > "$out/ncu-version.txt" 2>&1
compute-sanitizer --version > "$out/sanitizer-version.txt" 2>&1
timeout 240 ncu --clock-control none --target-processes all --csv --page details \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  python3 /tmp/honest.py > "$out/ncu-details.csv" 2> "$out/ncu-details.err"; echo "rc=$?" >> "$out/ncu-details.err"
timeout 240 ncu --clock-control none --target-processes all --csv --page raw --metrics \
  gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__shared_mem_per_block_static \
  python3 /tmp/honest.py > "$out/ncu-raw.csv" 2> "$out/ncu-raw.err"; echo "rc=$?" >> "$out/ncu-raw.err"
for tool in memcheck racecheck initcheck; do
  for prog in honest oob; do
    timeout 240 compute-sanitizer --tool $tool --print-limit 10 --error-exitcode 86 python3 /tmp/$prog.py \
      > "$out/sanitizer-$tool-$prog.txt" 2>&1; echo "rc=$?" >> "$out/sanitizer-$tool-$prog.txt"
  done
done
ls -la "$out"
