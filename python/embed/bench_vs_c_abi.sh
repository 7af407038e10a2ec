#!/usr/bin/env bash
# The embedded Python kernel's rate against the C ABI example kernel on the same cases, same run:
# fuzz_gemm of BUILD (a normal build's replay driver, or the libFuzzer build: both run the files
# given) replays corpus/fuzz_gemm's cases REPEAT times per round with each library, alternating,
# ROUNDS rounds, then prints the Python/C ratio of each round and their median. CASES=all takes
# every case (the real decode shapes, 256 experts included); the default leaves the real-shape
# v2-W* seeds out. The Python side is example_kernels:reference, the same C++ reference the
# example kernel runs, so the difference is the way in. Needs the mxdiff package importable
# (MXDIFF_PYTHON_PATH); fuzz_gemm's environment passes through (MXDIFF_MODULES=external: the
# external kernel alone, without the builtin GPU kernels).
#   python/embed/bench_vs_c_abi.sh BUILD EMBED_BUILD [ROUNDS=3] [REPEAT=20]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$1 embed=$2 rounds=${3:-3} repeat=${4:-20}
if [ "${CASES:-}" = all ]; then files=$(ls corpus/fuzz_gemm/*); else files=$(ls corpus/fuzz_gemm/* | grep -v "/v2-W"); fi
inputs=()
for _ in $(seq "$repeat"); do inputs+=($files); done
export MXDIFF_PYTHON=example_kernels:reference MXDIFF_FINDINGS_DIR="$(mktemp -d)"
export MXDIFF_PYTHON_PATH="$PWD/python/embed${MXDIFF_PYTHON_PATH:+:$MXDIFF_PYTHON_PATH}"
log="$MXDIFF_FINDINGS_DIR/fuzz_gemm.log"
ratios=()
child=
trap '[ -n "$child" ] && kill "$child" 2>/dev/null; exit 124' TERM INT  # stopped (timeout): fuzz_gemm too
for round in $(seq "$rounds"); do
  rates=()
  for lib in "$build/fuzz/libmxdiff_example_kernel.so" "$embed/libmxdiff_python_kernel.so"; do
    start=$(date +%s.%N)
    MXDIFF_EXTERNAL_KERNEL="$lib" "$build/fuzz/fuzz_gemm" "${inputs[@]}" >"$log" 2>&1 &
    child=$!
    wait "$child" || {
      echo "bench_vs_c_abi: fuzz_gemm with $(basename "$lib") failed; its log ends:" >&2
      tail -n 15 "$log" >&2
      exit 2
    }
    end=$(date +%s.%N)
    rate=$(python3 -c "import sys; print(f'{int(sys.argv[1]) / (float(sys.argv[3]) - float(sys.argv[2])):.1f}')" \
      "${#inputs[@]}" "$start" "$end")
    rates+=("$rate")
    echo "round $round $(basename "$lib"): ${#inputs[@]} inputs, $rate inputs/s"
  done
  ratios+=("$(python3 -c "import sys; print(f'{float(sys.argv[2]) / float(sys.argv[1]):.2f}')" "${rates[@]}")")
done
python3 -c "import statistics, sys; r = [float(x) for x in sys.argv[1:]]; m = statistics.median(r); \
print(f'bench_vs_c_abi: Python / C ABI rate per round {\" \".join(sys.argv[1:])}; median {m:.2f} ' \
      f'({\"at least\" if m >= 0.5 else \"LESS than\"} half the C ABI rate)')" "${ratios[@]}"
