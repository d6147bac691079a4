#!/usr/bin/env bash
# N identical small CPU runs at the project's defaults (issue 44 §4: A/A coverage over at least 30 CPU runs), each a
# run of its own under OUT/run-XX: torch, its A/A twin and an identical copy ("same") on four workloads of a
# vector op, one thread per worker. Then:  opmatrix calibration OUT/run-* --pairs OUT/run-01:OUT/run-02 ...
#   lab/cpu_calibration.sh OUT N [python]
set -euo pipefail
out=$(realpath -m "${1:?OUT}") n=${2:-30} py=${3:-python3}
project=$(mktemp -d)
mkdir -p "$project/kernels/scale" "$project/backends" "$project/matrix" "$out"
cat > "$project/kernels/scale/spec.py" <<'PY'
"""scale: out = 2 x over a vector (an A/A subject: every contestant is the same code)."""
WORKLOADS = {"n64k": {"n": 1 << 16}, "n256k": {"n": 1 << 18}, "n1m": {"n": 1 << 20}, "n4m": {"n": 1 << 22}}


def describe(w):
    return f"n={w['n']}"


def flops(w):
    return float(w["n"])


def min_bytes(w, dtype):
    return 8.0 * w["n"]


def tolerance(dtype):
    return 1e-6


def make_inputs(w, dtype, device, seed):
    import torch

    g = torch.Generator().manual_seed(seed)
    return (torch.randn(w["n"], generator=g, dtype=getattr(torch, dtype)),)


def make_output(w, dtype, device):
    import torch

    return torch.empty(w["n"], dtype=getattr(torch, dtype))


def reference(inputs, w):
    return inputs[0].double() * 2
PY
impl='import torch


def build(workload, dtype, device, variant):
    def scale(x, out):
        torch.mul(x, 2, out=out)

    return scale
'
printf '%s' "$impl" > "$project/kernels/scale/torch.py"
printf '%s' "$impl" > "$project/kernels/scale/same.py"
cat > "$project/backends/same.py" <<'PY'
"""The framework's own code under another name: an identical contestant."""
import torch


def available():
    return torch.__version__
PY
cat > "$project/matrix/aa.toml" <<'TOML'
name = "cpu-aa"
description = "torch, its A/A twin and an identical copy, at the project's defaults"
backends = ["torch", "same"]
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
[[toolchain]]
name = "here"
system = true
[[kernel]]
name = "scale"
workloads = { cpu = ["n64k", "n256k", "n1m", "n4m"] }
dtypes = { cpu = ["float32"] }
TOML
cd "$project"
for i in $(seq -w 1 "$n"); do
  start=$(date +%s)
  OPMATRIX_ROOT="$project" "$py" -m opmatrix run matrix/aa.toml --no-ray --run-id "run-$i" --reports "$out" \
    > "$out/run-$i.log" 2>&1 || echo "run $i exit $?"
  echo "run $i: $(( $(date +%s) - start )) s, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
rm -rf "$project"
