#!/usr/bin/env bash
# How long a newcomer's first `nox -s matrix` takes on this machine: the environments, a cold run (every
# compile-only job built again: --rebuild) and a warm run (the second one: compile-only rows from the cache), each
# timed by the wall clock, with the phase breakdown of each run read from its stored rows (lab/bench_phases.py).
#
#   lab/bench_first_run.sh [MATRIX]          # default: matrix/default.toml
#
# Run folders go to a temporary folder (BENCH_REPORTS to choose it), never reports/. The environments step is a run
# that starts no job (--deadline-s 0): nox builds or checks each cell's environment and stops; on a machine where
# they exist it measures only that check. Figures belong in docs/results.md, with the machine and its load.
set -uo pipefail
cd "$(dirname "$0")/.."
matrix=${1:-matrix/default.toml}
reports=${BENCH_REPORTS:-$(mktemp -d /tmp/opmatrix-bench.XXXXXX)}
mkdir -p "$reports"
read -ra nox <<< "${NOX:-nox}"   # the nox command, words allowed: NOX="python3 -m nox"
stamp=$(date -u +%Y%m%d-%H%M%S)

timed() {  # timed NAME ARGS...: one `nox -s matrix` run, its wall time in seconds on stdout
  local name=$1 start end
  shift
  start=$(date +%s.%N)
  "${nox[@]}" -s matrix -- "$matrix" --reports "$reports" --run-id "bench-$stamp-$name" "$@" > "$reports/$name.log" 2>&1
  local code=$?
  end=$(date +%s.%N)
  echo "  $name: exit $code (log $reports/$name.log)" >&2
  if [ ! -f "$reports/bench-$stamp-$name/run.json" ]; then  # the run never started: nothing to time
    tail -5 "$reports/$name.log" >&2
    echo "bench_first_run: the $name step did not run (exit $code); see $reports/$name.log" >&2
    exit 2
  fi
  python3 -c "print(f'{$end - $start:.1f}')"
}

echo "matrix $matrix on $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); run folders under $reports" >&2
envs=$(timed envs --deadline-s 0) || exit 2
cold=$(timed cold --rebuild) || exit 2
warm=$(timed warm) || exit 2
echo
echo "environments (build or check, no job): ${envs} s"
echo "cold run (--rebuild):                  ${cold} s"
echo "warm run:                              ${warm} s"
echo
python=.nox/matrix/bin/python
[ -x "$python" ] || python=python3
for name in cold warm; do
  "$python" lab/bench_phases.py "$reports/bench-$stamp-$name" "$(eval echo \$$name)"
done
