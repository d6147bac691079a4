#!/usr/bin/env bash
# Run a matrix on a GPU host that has no package index (the H200 image: torch, triton, scipy, pandas, rich):
# TileLang, nox and pydantic come from an offline wheel bundle (python3 ../shared/tools/offline_bundle.py
# .bundle/tl.tar.xz tilelang==0.1.15 nox pydantic packaging), unpacked once under /tmp/site.
#
#   lab/gpu_host_run.sh MATRIX RUN_ID DEADLINE_S [extra opmatrix run args...]
#
# Starts the run, or resumes it when reports/RUN_ID already exists; stops starting jobs after DEADLINE_S, so
# consecutive calls of a time-boxed machine complete one run. Output (report, logs) is copied to $OUT if set.
# Run folders go under $RUNS (default reports/). A device call sees the caller's working tree, so a run under
# reports/ must have results.jsonl and run.json copied back between calls, or the next call finds no run to resume
# and starts it again (that cost 20261130-h200-upgrade a session); RUNS=/tmp/runs keeps them on the warm machine
# instead, seeded from reports/RUN_ID when the caller has one.
# The bundle: BUNDLE=path (default .bundle/tl.tar.xz) unpacked into /tmp/site unless SKIP_BUNDLE=1 (already staged).
# The deadline counts from the run's start, cell environments included: a resume that rebuilds two environments
# needs more than a minute before its first job.
set -uo pipefail
matrix=$1 run_id=$2 deadline=$3
shift 3
runs=${RUNS:-reports}
if [ "${SKIP_BUNDLE:-0}" != 1 ] && [ ! -d /tmp/site/nox ]; then
  mkdir -p /tmp/site && tar -C /tmp/site -xJf "${BUNDLE:-.bundle/tl.tar.xz}" || exit 3
fi
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
if [ ! -f "$runs/$run_id/results.jsonl" ] && [ -f "reports/$run_id/results.jsonl" ]; then
  mkdir -p "$runs" && cp -r "reports/$run_id" "$runs/"
fi
resume=()
[ -f "$runs/$run_id/results.jsonl" ] && resume=(--resume)
python3 -m nox --no-venv -s matrix -- "$matrix" --no-ray --run-id "$run_id" --deadline-s "$deadline" \
  --reports "$runs" "${resume[@]}" "$@" 2>&1 | tee -a "/tmp/$run_id.log"
rc=${PIPESTATUS[0]}
if [ -n "${OUT:-}" ]; then
  # what the report is rebuilt from (opmatrix report), and the log: three files a run (a device call returns 8)
  mkdir -p "$OUT/$run_id"
  cp "$runs/$run_id"/{results.jsonl,run.json} "$OUT/$run_id/" 2>/dev/null
  # a run with [run] profile = "ncu": its Nsight Compute reports (profiles/*.ncu-rep, the rows name them)
  [ -d "$runs/$run_id/profiles" ] && cp -r "$runs/$run_id/profiles" "$OUT/$run_id/"
  tail -c 2000000 "/tmp/$run_id.log" > "$OUT/$run_id/run.log"
fi
exit $rc
