#!/usr/bin/env bash
# Run HERE (not on the GPU machine): builds mxdiff._core for the GPU machine's Python 3.12 into
# python/gpu/prebuilt/ (site/mxdiff and runtime-libs/, the build's shared libraries that machine
# lacks: absl, fmt), which run_on_gpu.sh uses when it is carried (carry: python/gpu/prebuilt).
#   python/gpu/build_for_gpu.sh [PYTHON3.12]
set -euo pipefail
cd "$(dirname "$0")/../.."
python312="${1:-$(command -v python3.12 || true)}"
[ -n "$python312" ] || { echo "build_for_gpu: no python3.12 here (give its path)" >&2; exit 2; }
python312="$("$python312" -c 'import sys; print(sys.executable)')"
nanobind_dir="$(python3 -m nanobind --cmake_dir)"  # nanobind is source: any Python's copy builds for 3.12
out=python/gpu/prebuilt
cmake -S python -B "$out/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$python312" \
  -Dnanobind_ROOT="$nanobind_dir" ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} >/dev/null
cmake --build "$out/build" -j "$(nproc)" --target _core
rm -rf "$out/site" "$out/runtime-libs"
mkdir -p "$out/site/mxdiff"
cp python/mxdiff/*.py "$out/site/mxdiff/"
cp "$out"/build/_core.cpython-312*.so "$out/site/mxdiff/"
tools/gpu/collect_runtime_libs.sh "$out/runtime-libs" "$out"/site/mxdiff/_core.cpython-312*.so
# The C++ runtime stays the GPU machine's own (newer, backward compatible): ours first on
# LD_LIBRARY_PATH would shadow it for torch and triton too.
rm -f "$out"/runtime-libs/libstdc++.so* "$out"/runtime-libs/libgcc_s.so*
# What it was built from: gpu_env.sh refuses a prebuilt package whose C++ sources changed since.
sha1sum python/src/*.cc python/CMakeLists.txt > "$out/SOURCES"
echo "build_for_gpu: $out/site (carry python/gpu/prebuilt; on the GPU machine: python/gpu/gpu_session.sh)"
