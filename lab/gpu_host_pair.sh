#!/usr/bin/env bash
# Two identical runs of one matrix at the same time on a host with two GPUs, one run per GPU (CUDA_VISIBLE_DEVICES
# pins each opmatrix to its GPU), each through lab/gpu_host_run.sh: starts them, or resumes both.
#
#   lab/gpu_host_pair.sh MATRIX RUN_ID_A RUN_ID_B DEADLINE_S [extra opmatrix run args, e.g. --redo runtime_error]
set -uo pipefail
matrix=$1 run_a=$2 run_b=$3 deadline=$4
shift 4
if [ ! -d /tmp/site/nox ]; then
  mkdir -p /tmp/site && tar -C /tmp/site -xJf .bundle/tl.tar.xz || exit 3
fi
here=$(dirname "$0")
CUDA_VISIBLE_DEVICES=0 "$here/gpu_host_run.sh" "$matrix" "$run_a" "$deadline" "$@" > /dev/null 2>&1 &
a=$!
CUDA_VISIBLE_DEVICES=1 "$here/gpu_host_run.sh" "$matrix" "$run_b" "$deadline" "$@" > /dev/null 2>&1 &
b=$!
wait $a; rc_a=$?
wait $b; rc_b=$?
echo "run $run_a: exit $rc_a; run $run_b: exit $rc_b"
for run in "$run_a" "$run_b"; do tail -n 5 "/tmp/$run.log"; done
[ "$rc_a" -le 1 ] && [ "$rc_b" -le 1 ]
