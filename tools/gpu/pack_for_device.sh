#!/usr/bin/env bash
# Packs what a GPU machine without the build's packages needs into one archive: the GPU tests,
# benchmarks, mxdiff and prepare_stress of BUILD_DIR, fuzz_gemm/fuzz_layer/repro of a libFuzzer
# build (FUZZ_BUILD_DIR, optional), the audit fixtures, and their shared libraries.
#   tools/gpu/pack_for_device.sh OUT.tar.xz BUILD_DIR [FUZZ_BUILD_DIR]
# On the GPU machine: tar xJf OUT.tar.xz, then
#   MXDIFF_FUZZ_BUILD_DIR=device-build/fuzz tools/gpu/run_gpu_suite.sh device-build/kern
#   MXDIFF_FUZZ_BUILD_DIR=device-build/fuzz tools/gpu/run_throughput.sh device-build/kern
# (each folder's runtime-libs/ is the same one; fixtures: MXDIFF_AUDIT_FIXTURES=device-build/audit-fixtures).
set -euo pipefail
if (($# < 2)); then
  echo "usage: $0 OUT.tar.xz BUILD_DIR [FUZZ_BUILD_DIR]" >&2
  exit 2
fi
archive=$1 build=$2 fuzz_build=${3:-}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/device-build
# copy_stripped FROM_DIR TO_DIR STRIP_FLAG RELATIVE_PATH...: the binaries that exist, stripped.
copy_stripped() {
  local from=$1 to=$2 flag=$3
  shift 3
  for relative in "$@"; do
    [ -x "$from/$relative" ] || continue
    mkdir -p "$to/$(dirname "$relative")"
    strip "$flag" -o "$to/$relative" "$from/$relative"
  done
}
copy_stripped "$build" "$root/kern" --strip-all \
  tests/kernels/kernels_gpu_test tests/kernels/moe_layer_gpu_test tests/kernels/prepare_stress \
  tests/kernels/kernel_benchmark tests/kernels/moe_layer_benchmark tests/fuzz/fuzz_gpu_test \
  tests/fuzz/fuzz_gemm_benchmark tests/fuzz/device_materialize_test tests/reference/device/device_reference_test \
  tests/fuzz/layer_fuzz_test tests/checkpoint/audit_gpu_test tests/tools/bench/bench_gpu_test \
  tests/tools/bench/bench_cpu_test tests/kernels/kernels_cpu_test tools/mxdiff/mxdiff \
  fuzz/fuzz_gemm fuzz/fuzz_layer tools/repro/repro fuzz/libmxdiff_example_kernel.so \
  tests/tools/gate/libmxdiff_gate_fake_v1.so tests/tools/gate/libmxdiff_gate_fake_folded_only.so \
  tests/tools/gate/libmxdiff_gate_fake_flip_folded.so
[ -x "$root/kern/tools/mxdiff/mxdiff" ] || { echo "$0: no tools/mxdiff/mxdiff in $build" >&2; exit 2; }
if [ -n "$fuzz_build" ]; then
  # Debug info goes, symbols stay: the sanitizers' reports still name functions.
  copy_stripped "$fuzz_build" "$root/fuzz" --strip-debug fuzz/fuzz_gemm fuzz/fuzz_layer tools/repro/repro \
    fuzz/libmxdiff_example_kernel.so
fi
[ -d "$build/tests/checkpoint/fixtures" ] && cp -r "$build/tests/checkpoint/fixtures" "$root/audit-fixtures"
mapfile -t binaries < <(find "$root/kern" "$root/fuzz" -type f -perm -u+x 2>/dev/null || true)
tools/gpu/collect_runtime_libs.sh "$root/kern/runtime-libs" "${binaries[@]}"
[ -d "$root/fuzz" ] && ln -s ../kern/runtime-libs "$root/fuzz/runtime-libs"
tar -C "$stage" -cJf "$archive" device-build
echo "$archive: $(du -h "$archive" | cut -f1)"
