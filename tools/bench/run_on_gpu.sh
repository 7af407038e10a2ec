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
# shellcheck source=tools/bench/gpu_common.sh
source "$(dirname "$0")/gpu_common.sh"
bench_env "$dir"
{
  gpu_line
  bench_cpu_tests "$dir"
  bench_gpu_tests "$dir" 180 60
} >"$out/tests.log" 2>&1
cat "$out/tests.log"
"$dir/mxdiff" bench --json="$out/bench.json" --csv="$out/bench.csv" "$@" 2>&1 | tee "$out/bench.log"
rc=${PIPESTATUS[0]}
echo "mxdiff bench exit status $rc"
exit "$rc"
