#!/usr/bin/env bash
# Builds fuzz_gemm once per planted kernel defect (tools/gpu/planted/*.patch), each in a scratch copy
# of the tree, never in this one, and once as HEAD is (the baseline), and packs them with their
# shared libraries into one archive to carry to a GPU machine, where tools/gpu/run_planted.sh times
# how long the campaign takes to find each (fuzz/README.md: "Planted kernel defects").
#   tools/gpu/build_planted.sh [PATCH...]          (default: every tools/gpu/planted/*.patch)
# Environment: MXDIFF_PLANTED_DIR (default build-planted, in this tree, ignored by git): holds the
#   scratch worktree (scratch/, a detached `git worktree` of HEAD with its own build-fuzz/: the libFuzzer
#   + ASan + UBSan build of the common configuration, CUDA on), the kit (kit/: baseline/fuzz/fuzz_gemm,
#   HEAD as it is; defects/NAME/fuzz/fuzz_gemm with NAME.patch and PLANTED.txt beside it; debug info
#   stripped; runtime-libs/, the shared libraries they need, tools/gpu/collect_runtime_libs.sh) and the
#   archive planted.tar.xz of the kit as device-build/planted/. On the GPU machine, in a checkout of
#   the same commit: tar xJf planted.tar.xz, then
#     tools/gpu/run_planted.sh device-build/planted/baseline device-build/planted/defects
# One scratch copy serves every patch in turn: the patch is applied, fuzz_gemm alone is built, the
# scratch copy is restored to HEAD; ccache (CCACHE_BASEDIR=/work) makes the restored files' objects
# hits. Exit status: 0 every patch applied, built and packed; 1 one did not; 2 bad usage.
set -euo pipefail
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
cd "$repo"
planted_dir=${MXDIFF_PLANTED_DIR:-build-planted}
if (($# == 0)); then
  set -- tools/gpu/planted/*.patch
fi
for patch in "$@"; do
  [ -f "$patch" ] || { echo "$0: $patch: no such patch" >&2; exit 2; }
done
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || {
  echo "$0: no nvcc: the planted defects are in the CUDA kernels, a build without CUDA has none of them" >&2; exit 2; }
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-/work} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
base=$(git rev-parse HEAD)
mkdir -p "$planted_dir"
planted_dir=$(cd "$planted_dir" && pwd)  # absolute: the configure step runs inside the scratch copy
scratch=$(cd "$planted_dir" && pwd)/scratch
kit=$(cd "$planted_dir" && pwd)/kit
started=$SECONDS

# The scratch copy: a detached worktree at HEAD, every tracked file as committed.
if [ ! -e "$scratch/.git" ]; then
  git worktree add --detach "$scratch" "$base" >/dev/null
fi
restore() { git -C "$scratch" checkout --quiet --force --detach "$base" && git -C "$scratch" clean --quiet -fd; }
restore
trap restore EXIT
if [ ! -f "$scratch/build-fuzz/build.ninja" ]; then
  (cd "$scratch" && CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMXDIFF_FUZZING=ON -DMXDIFF_CUDA=ON -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >"$planted_dir/configure.log" 2>&1) ||
    { echo "$0: configuring $scratch/build-fuzz failed: $planted_dir/configure.log" >&2; exit 1; }
fi

rm -rf "$kit"
mkdir -p "$kit/baseline/fuzz" "$kit/defects"
# Debug info goes, symbols stay (as pack_for_device.sh does): a sanitizer report still names functions.
start=$SECONDS
cmake --build "$scratch/build-fuzz" -j2 --target fuzz_gemm >"$planted_dir/baseline.build.log" 2>&1 ||
  { echo "$0: the baseline (HEAD) does not build (log $planted_dir/baseline.build.log)" >&2; exit 1; }
strip --strip-debug -o "$kit/baseline/fuzz/fuzz_gemm" "$scratch/build-fuzz/fuzz/fuzz_gemm"
echo "baseline: $base, built in $((SECONDS - start)) s, fuzz_gemm $(du -h "$kit/baseline/fuzz/fuzz_gemm" | cut -f1)"
failed=0
for patch in "$@"; do
  name=$(basename "$patch" .patch)
  log=$planted_dir/$name.build.log
  restore
  if ! git -C "$scratch" apply "$repo/$patch" 2>"$log"; then
    echo "$name: the patch does not apply to $base (log $log)"; failed=1; continue
  fi
  start=$SECONDS
  if ! cmake --build "$scratch/build-fuzz" -j2 --target fuzz_gemm >>"$log" 2>&1; then
    echo "$name: the build failed (log $log)"; failed=1; continue
  fi
  mkdir -p "$kit/defects/$name/fuzz"
  strip --strip-debug -o "$kit/defects/$name/fuzz/fuzz_gemm" "$scratch/build-fuzz/fuzz/fuzz_gemm"
  cp "$patch" "$kit/defects/$name/$name.patch"
  { echo "planted defect: $name"; echo "patch: $patch (sha256 $(sha256sum "$patch" | cut -c1-16))"
    echo "applied to: $base"; echo "built: $(date -u +%FT%TZ)"; } >"$kit/defects/$name/PLANTED.txt"
  echo "$name: built in $((SECONDS - start)) s, fuzz_gemm $(du -h "$kit/defects/$name/fuzz/fuzz_gemm" | cut -f1)"
done
restore
# Every binary must differ from the others and from the baseline (a patch that changed nothing plants nothing).
sums=$(find "$kit" -name fuzz_gemm -exec sha256sum {} + | cut -d' ' -f1 | sort | uniq -d)
[ -z "$sums" ] || { echo "$0: two of the kit's binaries are identical: a patch planted nothing" >&2; failed=1; }
"$repo/tools/gpu/collect_runtime_libs.sh" "$kit/runtime-libs" "$kit/baseline/fuzz/fuzz_gemm" >/dev/null
ln -s ../runtime-libs "$kit/baseline/runtime-libs"
# -9: a dictionary larger than one binary, so the copies' shared bytes compress once.
archive=$planted_dir/planted.tar.xz
stage=$(mktemp -d)
mkdir -p "$stage/device-build"
cp -a "$kit" "$stage/device-build/planted"
XZ_OPT=-9 tar -C "$stage" -cJf "$archive" device-build
rm -rf "$stage"
echo "kit: $kit ($(du -sh "$kit" | cut -f1)); archive $archive: $(du -h "$archive" | cut -f1)" \
  "($(stat -c %s "$archive") bytes); $((SECONDS - started)) s in all"
exit $failed
