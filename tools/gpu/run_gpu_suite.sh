#!/usr/bin/env bash
# On the GPU machine, in one go: the kernel GPU tests, the multi-process stress (stress.sh),
# compute-sanitizer (memcheck, racecheck, initcheck, synccheck) over the kernel tests, `mxdiff
# calibrate`, and the benchmark. Logs go to $OUT (or ./gpu-suite-out); a summary is printed last.
# Exit status: 0 when every step passed.
#
#   tools/gpu/run_gpu_suite.sh [BUILD_DIR]     (default build-kern)
#
# BUILD_DIR holds tests/kernels/{kernels_gpu_test,kernel_benchmark}, tools/mxdiff/mxdiff and,
# where the machine lacks the build's libraries, runtime-libs/ (tools/gpu/collect_runtime_libs.sh).
# Where BUILD_DIR holds tests/reference/device/device_reference_test, the device reference is
# checked against the CPU reference. Where BUILD_DIR also holds tests/fuzz/fuzz_gpu_test and
# fuzz/fuzz_gemm (the replay binary), the fuzz corpus is replayed on the GPU too; with MXDIFF_FUZZ_BUILD_DIR (a -DMXDIFF_FUZZING=ON build
# holding fuzz/fuzz_gemm and tools/repro/repro) a fuzz_gemm campaign of MXDIFF_FUZZ_TIME seconds
# (default 60) runs last, corpus/ left as it is. Where BUILD_DIR holds
# tests/kernels/{moe_layer_gpu_test,moe_layer_benchmark}, the MoE layer's graph tests (and
# memcheck over them) and benchmark run, and tests/fuzz/layer_fuzz_test runs fuzz_layer's harness on the device; tests/fuzz/fuzz_gemm_benchmark in BUILD_DIR and in
# MXDIFF_FUZZ_BUILD_DIR gives fuzz_gemm's executions per second, uninstrumented and as fuzzed.
# MXDIFF_SEED fixes the tests' seeds (default: one fresh seed for the whole run, printed).
# MXDIFF_SANITIZERS picks the compute-sanitizer tools (default all four; empty for none).
set -uo pipefail
build=${1:-build-kern}
out=${OUT:-gpu-suite-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$build/runtime-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MXDIFF_SEED=${MXDIFF_SEED:-$(( (RANDOM << 30) ^ (RANDOM << 15) ^ RANDOM ))}
# A carried build's tests find the corpus and the vectors here, not in the tree it was built from.
export MXDIFF_CORPUS_DIR=${MXDIFF_CORPUS_DIR:-$PWD/corpus} MXDIFF_VECTORS_DIR=${MXDIFF_VECTORS_DIR:-$PWD/tests/vectors}
tests=$build/tests/kernels/kernels_gpu_test
benchmark=$build/tests/kernels/kernel_benchmark
mxdiff=$build/tools/mxdiff/mxdiff
summary=$out/summary.txt
: >"$summary"
failed=0

# shellcheck source=tools/gpu/steps.sh
source "$(dirname "$0")/steps.sh"

note "mxdiff GPU suite: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)," \
  "MXDIFF_SEED=$MXDIFF_SEED"
for binary in "$tests" "$benchmark" "$mxdiff"; do
  [ -x "$binary" ] || { note "missing $binary"; exit 2; }
done

step "gpu tests" "$out/gpu_tests.log" 120 "$tests"
# The device reference against the CPU reference (reference/device/), where built.
[ -x "$build/tests/reference/device/device_reference_test" ] &&
  step "device reference" "$out/device_reference.log" 180 "$build/tests/reference/device/device_reference_test"
# Several processes on the GPU, each launching right after Prepare on several streams.
[ -x "$build/tests/kernels/prepare_stress" ] &&
  step "stress" "$out/stress.log" $((${MXDIFF_STRESS_SECONDS:-60} + 120)) tools/gpu/stress.sh "$build" \
    "${MXDIFF_STRESS_SECONDS:-60}" "${MXDIFF_STRESS_PROCESSES:-4}"
step "calibrate" "$out/calibrate.log" 45 "$mxdiff" calibrate --expect=sm90-emulated --warps=1024 --steps=8
step "calibrate --write" "$out/calibrate.log" 20 "$mxdiff" calibrate --warps=32 --steps=4 \
  --write="$out/calibrate_vectors.csv"
step "benchmark" "$out/benchmark.log" 120 "$benchmark" --tune
sanitizers=${MXDIFF_SANITIZERS-memcheck racecheck initcheck synccheck}
for tool in $sanitizers; do
  step "sanitizer $tool" "$out/sanitizer.log" 120 compute-sanitizer --tool "$tool" --error-exitcode 99 "$tests"
done
moe_tests=$build/tests/kernels/moe_layer_gpu_test
if [ -x "$moe_tests" ]; then
  step "moe layer tests" "$out/moe_tests.log" 180 "$moe_tests"
  [[ " $sanitizers " == *" memcheck "* ]] &&
    step "moe memcheck" "$out/moe_sanitizer.log" 300 compute-sanitizer --tool memcheck --error-exitcode 99 "$moe_tests"
fi
[ -x "$build/tests/kernels/moe_layer_benchmark" ] &&
  step "moe benchmark" "$out/moe_benchmark.log" 180 "$build/tests/kernels/moe_layer_benchmark"
# fuzz_gemm's executions per second per worker, uninstrumented (this build) and as the
# campaign runs it (libFuzzer + ASan/UBSan, MXDIFF_FUZZ_BUILD_DIR).
for rates_build in "$build" "${MXDIFF_FUZZ_BUILD_DIR:-}"; do
  rates=$rates_build/tests/fuzz/fuzz_gemm_benchmark
  [ -n "$rates_build" ] && [ -x "$rates" ] &&
    ASAN_OPTIONS=${ASAN_OPTIONS:-protect_shadow_gap=0:detect_leaks=0} \
      step "fuzz_gemm rates" "$out/fuzz_gemm_rates.log" 120 "$rates"
done
# The device materialization of tensor recipes against the host's, bit for bit, where built.
[ -x "$build/tests/fuzz/device_materialize_test" ] &&
  step "device materialization" "$out/device_materialize.log" 300 "$build/tests/fuzz/device_materialize_test"
# fuzz_layer's harness with the device: the layer path admits each scale byte once (LayerTarget.*).
if [ -x "$build/tests/fuzz/layer_fuzz_test" ]; then
  step "layer fuzz tests" "$out/layer_fuzz_tests.log" 300 "$build/tests/fuzz/layer_fuzz_test"
fi
if [ -x "$build/tests/fuzz/fuzz_gpu_test" ]; then
  step "fuzz gpu tests" "$out/fuzz_gpu_tests.log" 300 "$build/tests/fuzz/fuzz_gpu_test"
fi
if [ -x "$build/fuzz/fuzz_gemm" ]; then
  step "fuzz_gemm replay" "$out/fuzz_gemm_replay.log" 120 "$build/fuzz/fuzz_gemm" corpus/fuzz_gemm
fi
if [ -n "${MXDIFF_FUZZ_BUILD_DIR:-}" ]; then
  step "fuzz_gemm campaign" "$out/campaign.log" $((${MXDIFF_FUZZ_TIME:-60} + 120)) tools/campaign/campaign \
    --build-dir "$MXDIFF_FUZZ_BUILD_DIR" --targets fuzz_gemm --time "${MXDIFF_FUZZ_TIME:-60}" --no-merge \
    --out "$out/campaign"
fi
# Where the instructions go: an opcode histogram of the decode kernel (8x128x64, both variants).
if command -v cuobjdump >/dev/null; then
  cuobjdump -sass -arch sm_90 "$benchmark" >"$out/sass.txt" 2>&1
  python3 - "$out/sass.txt" >"$out/sass_histogram.txt" <<'PY' && note "sass histogram         rc 0"
import collections, re, sys
kernels, name = {}, None
for line in open(sys.argv[1]):
    m = re.search(r'Function : (\S+)', line)
    if m:
        name = m.group(1); kernels[name] = collections.Counter(); continue
    m = re.match(r'\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)', line)
    if m and name:
        kernels[name][m.group(1).split('.')[0]] += 1
for name, counts in kernels.items():
    if 'GroupedGemm' not in name or 'ILi8ELi128ELi64E' not in name:
        continue
    print(name, sum(counts.values()), 'instructions:',
          ', '.join(f'{op} {n}' for op, n in counts.most_common(18)))
PY
  rm -f "$out/sass.txt"
fi
# MXDIFF_PROFILE=1: Nsight Compute on one W13 decode launch (clocks left as they are).
if [ "${MXDIFF_PROFILE:-0}" = 1 ] && command -v ncu >/dev/null; then
  step "ncu" "$out/ncu.log" 180 ncu --clock-control none -k regex:GroupedGemmKernel -s 235 -c 1 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section InstructionStats \
    --section LaunchStats "$benchmark"
fi

{
  echo
  echo "--- tests"
  grep -E '^\[(==========|  PASSED  |  FAILED  |  SKIPPED )\]' "$out/gpu_tests.log" | tail -25
  grep -E -m 20 'Failure|differ|error' "$out/gpu_tests.log"
  [ -f "$out/stress.log" ] && { echo "--- stress"; grep -E '^stress.sh:' "$out/stress.log"; }
  echo "--- sanitizers"
  grep -E '=== |ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer.log"
  echo "--- calibrate"
  grep -E '^(layout|device code|model|v100|sm90|exact|matching|no model|expected|wrote)' "$out/calibrate.log"
  [ -f "$out/sass_histogram.txt" ] && { echo "--- sass"; cut -c1-600 "$out/sass_histogram.txt"; }
  [ -f "$out/fuzz_gpu_tests.log" ] && { echo "--- fuzz gpu tests"; grep -E '^\[(==========|  PASSED  |  FAILED  |  SKIPPED )\]' "$out/fuzz_gpu_tests.log"; }
  [ -f "$out/fuzz_gemm_replay.log" ] && { echo "--- fuzz_gemm replay"; tail -3 "$out/fuzz_gemm_replay.log"; }
  [ -f "$out/campaign.log" ] && { echo "--- fuzz_gemm campaign"; tail -15 "$out/campaign.log"; }
  echo "--- benchmark"
  grep -E '^(device|W|\|)' "$out/benchmark.log"
  [ -f "$out/moe_tests.log" ] && { echo "--- moe layer tests"; grep -E '^\[(==========|  PASSED  |  FAILED  |  SKIPPED )\]' "$out/moe_tests.log"; }
  [ -f "$out/moe_benchmark.log" ] && { echo "--- moe benchmark"; grep -vE '^(\*\*\*WARNING|Run on|CPU Caches|  L[123]|Load Average)' "$out/moe_benchmark.log" | tail -30; }
  [ -f "$out/fuzz_gemm_rates.log" ] && { echo "--- fuzz_gemm rates"; grep -E '^(fuzz_gemm_benchmark|small|w13|===)' "$out/fuzz_gemm_rates.log"; }
} | tee -a "$summary"
exit $failed
