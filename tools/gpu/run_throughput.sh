#!/usr/bin/env bash
# On the GPU machine: issue 19's checks and measurements of fuzz_gemm's throughput, in one go.
#   1. device_materialize_test: the device materialization of tensor recipes = the host's, bit for bit
#   2. fuzz_gpu_test: the fuzz_gemm corpus through the kernels, on the CPU reference and with the
#      device reference as oracle (every large case also on the CPU: no disagreement)
#   3. fuzz_gemm_benchmark (uninstrumented, BUILD_DIR): executions per second per worker with the
#      CPU reference alone (MXDIFF_CPU_CHECK_EVERY=0, the rate before) and with the device oracle (16),
#      then 16 with every case's codes on the host (MXDIFF_BENCH_HOST_CODES=1: without the device way)
#   4. with MXDIFF_FUZZ_BUILD_DIR (a -DMXDIFF_FUZZING=ON build holding fuzz/fuzz_gemm): `campaign --targets fuzz_gemm` for MXDIFF_FUZZ_TIME seconds (default 600)
#      with MXDIFF_WORKERS_PER_GPU workers per GPU (default: the campaign's), corpus/ left as it is; its report
#      ends with what was compared and the executions per 30 s interval.
# Logs go to $OUT (or ./throughput-out); a summary is printed last. Exit status: 0 when every step
# passed.
#
#   tools/gpu/run_throughput.sh [BUILD_DIR]     (default build; tools/gpu/pack_for_device.sh packs
#   the binaries of both builds into one archive to carry)
#
# BUILD_DIR/runtime-libs (tools/gpu/collect_runtime_libs.sh) is put on LD_LIBRARY_PATH, as is
# MXDIFF_FUZZ_BUILD_DIR/runtime-libs.
set -uo pipefail
build=${1:-build}
out=${OUT:-throughput-out}
fuzz_build=${MXDIFF_FUZZ_BUILD_DIR:-}
mkdir -p "$out"
export LD_LIBRARY_PATH="$build/runtime-libs${fuzz_build:+:$fuzz_build/runtime-libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MXDIFF_SEED=${MXDIFF_SEED:-$(( (RANDOM << 30) ^ (RANDOM << 15) ^ RANDOM ))}
export MXDIFF_CORPUS_DIR=${MXDIFF_CORPUS_DIR:-$PWD/corpus}
summary=$out/summary.txt
: >"$summary"
failed=0

step_width=28
# shellcheck source=tools/gpu/steps.sh
source "$(dirname "$0")/steps.sh"

note "issue 19 throughput: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)," \
  "MXDIFF_SEED=$MXDIFF_SEED"
for binary in tests/fuzz/device_materialize_test tests/fuzz/fuzz_gpu_test tests/fuzz/fuzz_gemm_benchmark; do
  [ -x "$build/$binary" ] || { note "missing $build/$binary"; exit 2; }
done
step "device materialization" "$out/device_materialize.log" 300 "$build/tests/fuzz/device_materialize_test"
step "fuzz gpu tests" "$out/fuzz_gpu_tests.log" 600 "$build/tests/fuzz/fuzz_gpu_test"
for every in 0 16; do
  step "benchmark cpu-check-every $every" "$out/fuzz_gemm_benchmark.log" 300 \
    env MXDIFF_CPU_CHECK_EVERY=$every "$build/tests/fuzz/fuzz_gemm_benchmark"
done
# The same with every case's codes materialized on the host (the host path before the device way).
step "benchmark 16, host codes" "$out/fuzz_gemm_benchmark.log" 300 \
  env MXDIFF_CPU_CHECK_EVERY=16 MXDIFF_BENCH_HOST_CODES=1 "$build/tests/fuzz/fuzz_gemm_benchmark"
grep -E "^(small|w13)[a-z_0-9]*/|oracle:|codes:|^device_materialized|^host_weights" "$out/fuzz_gemm_benchmark.log" |
  tee -a "$summary"
if [ -n "$fuzz_build" ]; then
  time_s=${MXDIFF_FUZZ_TIME:-600}
  step "campaign fuzz_gemm ${time_s} s" "$out/campaign.log" $((time_s + 300)) tools/campaign/campaign \
    --build-dir "$fuzz_build" --targets fuzz_gemm --time "$time_s" ${MXDIFF_WORKERS_PER_GPU:+--workers-per-gpu "$MXDIFF_WORKERS_PER_GPU"} \
    --cpu-check-every "${MXDIFF_CPU_CHECK_EVERY:-16}" --no-merge --out "$out/campaign"
  sed -n '/^target /,$p' "$out/campaign.log" | tee -a "$summary"
fi
note "logs: $out"
exit $failed
