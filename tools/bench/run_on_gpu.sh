#!/usr/bin/env bash
# On a GPU machine: the bench's tests, then `mxdiff bench` itself, logs and results to $OUT (or
# ./bench-out). DIR holds mxdiff, bench_cpu_test, bench_gpu_test, libmxdiff_example_kernel.so and
# runtime-libs/ (tools/gpu/collect_runtime_libs.sh); everything after DIR goes to `mxdiff bench`.
#
#   tools/bench/run_on_gpu.sh DIR [BENCH FLAGS...]
#
# Writes bench.log, bench.json, bench.csv and tests.log; the PNG is drawn afterwards where
# matplotlib is (tools/bench/plot_bench.py). Exit status: mxdiff bench's.
set -uo pipefail
dir=${1:?usage: $0 DIR [BENCH FLAGS...]}
shift
out=${OUT:-bench-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$dir/runtime-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MXDIFF_EXAMPLE_KERNEL="$dir/libmxdiff_example_kernel.so"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv,noheader 2>&1
  timeout 120 "$dir/bench_cpu_test" --gtest_brief=1 2>&1 | tail -4
  timeout 180 "$dir/bench_gpu_test" 2>&1 | grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED|RUN) *\]|Failure|error|Expected|Which|actual' | head -60
} >"$out/tests.log" 2>&1
cat "$out/tests.log"
"$dir/mxdiff" bench --json="$out/bench.json" --csv="$out/bench.csv" "$@" 2>&1 | tee "$out/bench.log"
rc=${PIPESTATUS[0]}
echo "mxdiff bench exit status $rc"
exit "$rc"
