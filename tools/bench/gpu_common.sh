# shellcheck shell=bash
# Sourced by the bench's GPU scripts (run_on_gpu.sh, run_first_use_and_layer_on_gpu.sh).

# bench_env DIR: DIR/runtime-libs on LD_LIBRARY_PATH, DIR's example kernel as MXDIFF_EXAMPLE_KERNEL.
bench_env() {
  export LD_LIBRARY_PATH="$1/runtime-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export MXDIFF_EXAMPLE_KERNEL="$1/libmxdiff_example_kernel.so"
}

# gpu_line: the GPU's name, driver, clocks, temperature and power, one line.
gpu_line() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv,noheader 2>&1
}

# bench_cpu_tests DIR: bench_cpu_test's last lines.
bench_cpu_tests() { timeout 120 "$1/bench_cpu_test" --gtest_brief=1 2>&1 | tail -4; }

# bench_gpu_tests DIR TIMEOUT_S LINES: bench_gpu_test's results and failures, at most LINES lines.
bench_gpu_tests() {
  timeout "$2" "$1/bench_gpu_test" 2>&1 |
    grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED|RUN) *\]|Failure|error|Expected|Which|actual' | head -"$3"
}
