#!/usr/bin/env bash
# Times two kernel_benchmark binaries (a baseline and a candidate build) on the same machine in
# one go, alternating A B A B so that drift shows up as a spread between the two runs of one
# binary rather than as a difference between them. Tables go to stdout and to $OUT (or ./ab-out).
#
#   tools/gpu/compare_benchmarks.sh BASELINE_BENCHMARK CANDIDATE_BENCHMARK [ROUNDS] [ARGS...]
#
# ARGS go to both binaries (for example --tune, or --sets-bytes=...). The same MXDIFF_SEED is
# used for every run, so both binaries time the same weights.
set -uo pipefail
if (($# < 2)); then
  echo "usage: $0 BASELINE_BENCHMARK CANDIDATE_BENCHMARK [ROUNDS] [ARGS...]" >&2
  exit 2
fi
baseline=$1
candidate=$2
rounds=${3:-2}
shift $(($# < 3 ? $# : 3))
out=${OUT:-ab-out}
mkdir -p "$out"
export MXDIFF_SEED=${MXDIFF_SEED:-$(( (RANDOM << 30) ^ (RANDOM << 15) ^ RANDOM ))}
echo "MXDIFF_SEED=$MXDIFF_SEED, $rounds rounds, args: $*"
failed=0
for ((round = 1; round <= rounds; ++round)); do
  for which in baseline candidate; do
    binary=${!which}
    log=$out/$which-$round.log
    if ! timeout 150 "$binary" "$@" >"$log" 2>&1; then
      echo "$which round $round failed (log $log):"
      tail -5 "$log"
      failed=1
      continue
    fi
    echo "--- $which, round $round"
    grep -E '^(device|W|\|)' "$log"
  done
done
exit $failed
