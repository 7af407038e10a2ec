#!/usr/bin/env bash
# Several processes on one GPU at once, as a loaded machine has them: PROCESSES copies of
# prepare_stress (a new layer per round, launched right after Prepare on four streams, with copy
# load of its own) and, for as long as they run, kernels_gpu_test's bit tests in a loop. Any
# output that differs from the reference fails the step. Logs under $OUT (or ./gpu-suite-out).
#   tools/gpu/stress.sh BUILD_DIR [SECONDS (default 60)] [PROCESSES (default 4)]
# MXDIFF_SEED: the first process's seed (default a fresh one, printed); process i takes SEED + i.
# With MXDIFF_FUZZ_BUILD_DIR (a libFuzzer build with fuzz_gemm), a fuzz_gemm campaign of
# MXDIFF_STRESS_CAMPAIGN_WORKERS (default 8) workers on the GPU runs beside them for as long: the
# load under which main b6b3e64 gave other bits (issue 23). Its findings fail the step too.
set -uo pipefail
build=${1:?usage: tools/gpu/stress.sh BUILD_DIR [SECONDS] [PROCESSES]}
seconds=${2:-60}
processes=${3:-4}
out=${OUT:-gpu-suite-out}
mkdir -p "$out"
stress=$build/tests/kernels/prepare_stress
tests=$build/tests/kernels/kernels_gpu_test
for binary in "$stress" "$tests"; do
  [ -x "$binary" ] || { echo "stress.sh: missing $binary" >&2; exit 2; }
done
seed=${MXDIFF_SEED:-$(( (RANDOM << 30) ^ (RANDOM << 15) ^ RANDOM ))}
echo "stress.sh: $processes processes x ${seconds} s, seeds $seed..$((seed + processes - 1))"
pids=()
for ((i = 0; i < processes; ++i)); do
  "$stress" --seconds="$seconds" --streams=4 --launches=2 --load=1 --seed=$((seed + i)) \
    >"$out/stress_$i.log" 2>&1 &
  pids+=($!)
done
campaign_pid=
if [ -n "${MXDIFF_FUZZ_BUILD_DIR:-}" ]; then
  workers=${MXDIFF_STRESS_CAMPAIGN_WORKERS:-8}
  echo "stress.sh: and a fuzz_gemm campaign of $workers workers ($MXDIFF_FUZZ_BUILD_DIR)"
  python3 tools/campaign/campaign --build-dir "$MXDIFF_FUZZ_BUILD_DIR" --targets fuzz_gemm --gpu-workers 1 \
    --workers-per-gpu "$workers" --time "$seconds" --out "$out/stress_campaign" >"$out/stress_campaign.log" 2>&1 &
  campaign_pid=$!
fi
runs=0 failed_runs=0
filter='GemmBitsTest.RepeatedRunsAreBitIdentical:GemmBitsTest.RandomShapesEveryTacticVariantAndSplitCount'
while kill -0 "${pids[@]}" 2>/dev/null; do
  if ! MXDIFF_SEED=$((seed + 1000 + runs)) "$tests" --gtest_filter="$filter" >>"$out/stress_tests.log" 2>&1; then
    failed_runs=$((failed_runs + 1))
    echo "stress.sh: kernels_gpu_test failed with MXDIFF_SEED=$((seed + 1000 + runs))"
  fi
  runs=$((runs + 1))
done
status=0
for ((i = 0; i < processes; ++i)); do
  wait "${pids[$i]}"
  rc=$?
  ((rc == 0)) || status=1
  echo "stress.sh: process $i (rc $rc): $(tail -n 1 "$out/stress_$i.log")"
done
if [ -n "$campaign_pid" ]; then
  wait "$campaign_pid"
  rc=$?
  ((rc == 0)) || status=1
  echo "stress.sh: campaign (rc $rc): $(grep -E '^fuzz_gemm ' "$out/stress_campaign.log" | tail -n 1)"
  sed -n '/ findings:$/,$p' "$out/stress_campaign.log" | head -n 40 | sed 's/^/stress.sh: /'
fi
echo "stress.sh: kernels_gpu_test under the load: $failed_runs of $runs runs failed"
((failed_runs == 0)) || status=1
exit $status
