#!/usr/bin/env bash
# On a GPU machine, issue 18 item 5's evidence in one go (results to $OUT, or ./bench-out):
#   1. the tests: bench_cpu_test, kernels_cpu_test's tune-on-first-use tests, bench_gpu_test
#      (TuneOnFirstUse*, LayerBench*, LayerShape* and the rest);
#   2. the naive vs sound effect of tune-on-first-use on W13 and W2 at PP2xTP4: the same seed with
#      --first_use=table and --first_use=tune (naive row: changes; sound row: does not);
#   3. the whole MoE layer at PP2xTP4 (us per layer, the seed's unit), ordinary vs folded, with both
#      runner modes.
# DIR holds mxdiff, bench_cpu_test, bench_gpu_test, kernels_cpu_test (optional),
# libmxdiff_example_kernel.so and runtime-libs/ (tools/gpu/collect_runtime_libs.sh). BUDGET_S
# (default 3) is each measurement's time budget; SEED (default 20261205) the bench seed.
#
#   tools/bench/run_first_use_and_layer_on_gpu.sh DIR
#
# Writes tests.log and, per run, RUN.log / RUN.json / RUN.csv (RUN: gemm-table, gemm-tune,
# layer-table, layer-tune); then summary.txt (the verdict and naive lines). Draw the PNGs where
# matplotlib is: /usr/bin/python3 tools/bench/plot_bench.py --json RUN.json --out RUN.png
# Exit status: 0 when every run finished (a verdict or a failed control), else the first failure's.
set -uo pipefail
dir=${1:?usage: $0 DIR}
out=${OUT:-bench-out}
budget=${BUDGET_S:-3}
seed=${SEED:-20261205}
mkdir -p "$out"
# shellcheck source=tools/bench/gpu_common.sh
source "$(dirname "$0")/gpu_common.sh"
bench_env "$dir"
{
  gpu_line
  bench_cpu_tests "$dir"
  if [ -x "$dir/kernels_cpu_test" ]; then
    timeout 60 "$dir/kernels_cpu_test" --gtest_brief=1 --gtest_filter='*FirstUse*' 2>&1 | tail -3
  fi
  bench_gpu_tests "$dir" 420 80
} >"$out/tests.log" 2>&1
cat "$out/tests.log"
common=(--naive --budget_s="$budget" --min_rounds=30 --target_pct=0.05 --bench_seed="$seed")
status=0
run() {  # NAME FLAGS...
  local name=$1
  shift
  "$dir/mxdiff" bench "${common[@]}" "$@" --json="$out/$name.json" --csv="$out/$name.csv" >"$out/$name.log" 2>&1
  local rc=$?
  echo "== $name: mxdiff bench $* (exit $rc)" | tee -a "$out/summary.txt"
  grep -E 'verdict|naive ABBA|sound ABBA: .* rounds|^mxdiff bench: ' "$out/$name.log" | tee -a "$out/summary.txt"
  if ((rc > 1 && status == 0)); then status=$rc; fi
}
: >"$out/summary.txt"
run gemm-table --shapes=w13-tp4,w2-tp4 --first_use=table
run gemm-tune --shapes=w13-tp4,w2-tp4 --first_use=tune
run layer-table --shapes=layer-tp4 --first_use=table
run layer-tune --shapes=layer-tp4 --first_use=tune
exit "$status"
