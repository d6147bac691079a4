#!/usr/bin/env bash
# How long a newcomer's first `nox -s matrix` takes on this machine: the environments, a cold run (every
# compile-only job built again: --rebuild) and a warm run (the second one: compile-only rows from the cache), each
# timed by the wall clock, with the phase breakdown of each run read from its stored rows (tools/bench_phases.py).
#
#   tools/bench_first_run.sh [MATRIX]          # default: matrix/default.toml
#
# Run folders go to a temporary folder (BENCH_REPORTS to choose it), never reports/. The environments step is a run
# that starts no job (--deadline-s 0): nox builds or checks each cell's environment and stops; on a machine where
# they exist it measures only that check. Figures belong in docs/results.md, with the machine and its load.
set -uo pipefail
cd "$(dirname "$0")/.."
matrix=${1:-matrix/default.toml}
reports=${BENCH_REPORTS:-$(mktemp -d /tmp/opmatrix-bench.XXXXXX)}
nox=${NOX:-nox}
stamp=$(date -u +%Y%m%d-%H%M%S)

timed() {  # timed NAME ARGS...: one `nox -s matrix` run, its wall time in seconds on stdout
  local name=$1 start end
  shift
  start=$(date +%s.%N)
  "$nox" -s matrix -- "$matrix" --reports "$reports" --run-id "bench-$stamp-$name" "$@" > "$reports/$name.log" 2>&1
  echo "  $name: exit $? (log $reports/$name.log)" >&2
  end=$(date +%s.%N)
  python3 -c "print(f'{$end - $start:.1f}')"
}

echo "matrix $matrix on $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); run folders under $reports" >&2
envs=$(timed envs --deadline-s 0)
cold=$(timed cold --rebuild)
warm=$(timed warm)
echo
echo "environments (build or check, no job): ${envs} s"
echo "cold run (--rebuild):                  ${cold} s"
echo "warm run:                              ${warm} s"
echo
python=.nox/matrix/bin/python
[ -x "$python" ] || python=python3
for name in cold warm; do
  "$python" tools/bench_phases.py "$reports/bench-$stamp-$name" "$(eval echo \$$name)"
done
