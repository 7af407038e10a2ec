#!/usr/bin/env bash
# Builds libmxdiff_turbomind_kernel.so, libmxdiff_turbomind_folded_kernel.so (folded.patch) and
# mxdiff_turbomind_smoke as a project of its own, on a machine with nvcc, cmake and ninja but none of
# mxdiff's Debian packages (README.md here), then runs the smoke check on both modules when a GPU
# is visible. Exit status 1 when the build or either smoke check fails.
#
#   fuzz/modules/turbomind/build_on_gpu.sh [LMDEPLOY_DIR [DEPS_DIR [BUILD_DIR]]]
#
# LMDEPLOY_DIR  an LMDeploy tree (at least CMakeLists.txt, cmake/, src/turbomind/); default .device/lmdeploy
# DEPS_DIR      a folder with include/fmt/ and include/concurrentqueue/; default .device/deps
# BUILD_DIR     default build-turbomind (the modules are BUILD_DIR/libmxdiff_turbomind[_folded]_kernel.so)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
source_dir=$(realpath "${1:-$repo/.device/lmdeploy}")
deps_dir=$(realpath "${2:-$repo/.device/deps}")
build_dir=$(realpath -m "${3:-$repo/build-turbomind}")
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] || { echo "build_on_gpu: no nvcc on PATH or in /usr/local/cuda/bin" >&2; exit 1; }
[ -d "$source_dir/src/turbomind" ] || { echo "build_on_gpu: $source_dir/src/turbomind is missing" >&2; exit 1; }
[ -d "$deps_dir/include/fmt" ] || { echo "build_on_gpu: $deps_dir/include/fmt is missing" >&2; exit 1; }

cmake -S "$here" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" \
  -DMXDIFF_TURBOMIND_SOURCE="$source_dir" -DMXDIFF_TURBOMIND_DEPS="$deps_dir"
start=$(date +%s)
cmake --build "$build_dir" -j 16
echo "build_on_gpu: built $build_dir/libmxdiff_turbomind_kernel.so and libmxdiff_turbomind_folded_kernel.so in" \
  "$(($(date +%s) - start)) s"

if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  failed=0
  "$build_dir/mxdiff_turbomind_smoke" "$build_dir/libmxdiff_turbomind_kernel.so" ordinary || failed=1
  "$build_dir/mxdiff_turbomind_smoke" "$build_dir/libmxdiff_turbomind_folded_kernel.so" folded || failed=1
  exit $failed
else
  echo "build_on_gpu: no GPU visible; on one run $build_dir/mxdiff_turbomind_smoke with" \
    "$build_dir/libmxdiff_turbomind_kernel.so ordinary, then $build_dir/libmxdiff_turbomind_folded_kernel.so folded"
fi
