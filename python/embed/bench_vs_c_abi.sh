#!/usr/bin/env bash
# The embedded Python kernel's rate against the C ABI example kernel on the same cases, same run:
# fuzz_gemm (replay mode of BUILD, a normal build) replays corpus/fuzz_gemm's cases (the real-shape
# v2-W* seeds left out) REPEAT times per round with each library, alternating, ROUNDS rounds.
# The Python side is example_kernels:reference, the same C++ reference the example kernel runs,
# so the difference is the way in. Needs the mxdiff package importable (MXDIFF_PYTHON_PATH).
#   python/embed/bench_vs_c_abi.sh BUILD EMBED_BUILD [ROUNDS=3] [REPEAT=20]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$1 embed=$2 rounds=${3:-3} repeat=${4:-20}
files=$(ls corpus/fuzz_gemm/* | grep -v "/v2-W")
inputs=()
for _ in $(seq "$repeat"); do inputs+=($files); done
export MXDIFF_PYTHON=example_kernels:reference MXDIFF_FINDINGS_DIR="$(mktemp -d)"
export MXDIFF_PYTHON_PATH="$PWD/python/embed${MXDIFF_PYTHON_PATH:+:$MXDIFF_PYTHON_PATH}"
for round in $(seq "$rounds"); do
  for lib in "$build/fuzz/libmxdiff_example_kernel.so" "$embed/libmxdiff_python_kernel.so"; do
    start=$(date +%s.%N)
    MXDIFF_EXTERNAL_KERNEL="$lib" "$build/fuzz/fuzz_gemm" "${inputs[@]}" >/dev/null 2>&1
    end=$(date +%s.%N)
    python3 -c "import sys; n, s = int(sys.argv[1]), float(sys.argv[3]) - float(sys.argv[2]); print(f'round $round $(basename "$lib"): {n} inputs in {s:.2f} s, {n / s:.0f} inputs/s')" \
      "${#inputs[@]}" "$start" "$end"
  done
done
