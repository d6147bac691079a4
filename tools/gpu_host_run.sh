#!/usr/bin/env bash
# Run a matrix on a GPU host that has no package index (the H200 image: torch, triton, scipy, pandas, rich):
# TileLang, nox and pydantic come from an offline wheel bundle (python3 ../shared/tools/offline_bundle.py
# .bundle/tl.tar.xz tilelang==0.1.15 nox pydantic packaging), unpacked once under /tmp/site.
#
#   tools/gpu_host_run.sh MATRIX RUN_ID DEADLINE_S [extra opmatrix run args...]
#
# Starts the run, or resumes it when reports/RUN_ID already exists; stops starting jobs after DEADLINE_S, so
# consecutive calls of a time-boxed machine complete one run. Output (report, logs) is copied to $OUT if set.
# A device call sees the caller's working tree: copy results.jsonl and run.json back into reports/RUN_ID/ between
# calls, or the next call finds no run to resume and starts it again (that cost 20261130-h200-upgrade a session).
# The deadline counts from the run's start, cell environments included: a resume that rebuilds two environments
# needs more than a minute before its first job.
set -uo pipefail
matrix=$1 run_id=$2 deadline=$3
shift 3
if [ ! -d /tmp/site/nox ]; then
  mkdir -p /tmp/site && tar -C /tmp/site -xJf .bundle/tl.tar.xz || exit 3
fi
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
resume=()
[ -f "reports/$run_id/results.jsonl" ] && resume=(--resume)
python3 -m nox --no-venv -s matrix -- "$matrix" --no-ray --run-id "$run_id" --deadline-s "$deadline" \
  "${resume[@]}" "$@" 2>&1 | tee -a "/tmp/$run_id.log"
rc=${PIPESTATUS[0]}
if [ -n "${OUT:-}" ]; then
  # what the report is rebuilt from (opmatrix report), and the log: three files a run (a device call returns 8)
  mkdir -p "$OUT/$run_id"
  cp reports/"$run_id"/{results.jsonl,run.json} "$OUT/$run_id/" 2>/dev/null
  tail -c 2000000 "/tmp/$run_id.log" > "$OUT/$run_id/run.log"
fi
exit $rc
