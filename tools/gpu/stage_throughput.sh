#!/usr/bin/env bash
# Stages what tools/gpu/run_throughput.sh needs into two small folders that can be carried to the
# GPU machine (ignored by git: /build*/): DEST-release/ (tests/fuzz/device_materialize_test,
# fuzz_gpu_test, fuzz_gemm_benchmark) and DEST-fuzz/ (fuzz/fuzz_gemm of the libFuzzer build), each
# with its runtime-libs/ (tools/gpu/collect_runtime_libs.sh): about 36 MB together, under a carry's
# 64 MiB. repro is left out (the campaign only prints its commands: replay findings with it here).
#
#   tools/gpu/stage_throughput.sh [BUILD [FUZZ_BUILD [DEST]]]   (default build build-fuzz build-stage)
#   # then, on the GPU machine:
#   MXDIFF_FUZZ_BUILD_DIR=build-stage-fuzz tools/gpu/run_throughput.sh build-stage-release
set -euo pipefail
build=${1:-build}
fuzz=${2:-build-fuzz}
dest=${3:-build-stage}
release_dir=$dest-release
fuzz_dir=$dest-fuzz
rm -rf "$release_dir" "$fuzz_dir"
mkdir -p "$release_dir/tests/fuzz" "$fuzz_dir/fuzz"
for binary in device_materialize_test fuzz_gpu_test fuzz_gemm_benchmark; do
  cp "$build/tests/fuzz/$binary" "$release_dir/tests/fuzz/"
done
cp "$fuzz/fuzz/fuzz_gemm" "$fuzz_dir/fuzz/"
tools/gpu/collect_runtime_libs.sh "$release_dir/runtime-libs" "$release_dir"/tests/fuzz/*
tools/gpu/collect_runtime_libs.sh "$fuzz_dir/runtime-libs" "$fuzz_dir/fuzz/fuzz_gemm"
du -sh "$release_dir" "$fuzz_dir"
