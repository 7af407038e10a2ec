#!/bin/bash -eu
# Builds mxdiff's CPU fuzz targets the OSS-Fuzz way: $CC/$CXX with $CFLAGS/$CXXFLAGS (they carry
# the sanitizer and coverage flags) and $LIB_FUZZING_ENGINE as the driver, into $OUT with a seed
# corpus zip (corpus/<target>/ plus that target's regressions), the dictionary and the options
# file per target. Tested locally by setting those variables (fuzz/README.md, "Scale out").
src="${SRC}/mxdiff"
build="${WORK:-/tmp}/mxdiff-build"
# Every target of fuzz/targets.txt; without CUDA the GPU targets check their CPU side.
mapfile -t targets < <(awk '/^fuzz_/ {print $1}' "$src/fuzz/targets.txt")

cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMXDIFF_CUDA=OFF \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
  -DMXDIFF_FUZZ_ENGINE="$LIB_FUZZING_ENGINE"
ninja -C "$build" "${targets[@]}"

for target in "${targets[@]}"; do
  cp "$build/fuzz/$target" "$OUT/"
  cp "$src/fuzz/options/$target.options" "$OUT/"
  seeds="$(mktemp -d)"
  cp "$src/corpus/$target/"* "$seeds/"
  cp "$src/corpus/regressions/$target."* "$seeds/" 2>/dev/null || true
  rm -f "$OUT/${target}_seed_corpus.zip"
  (cd "$seeds" && zip -q -r "$OUT/${target}_seed_corpus.zip" .)
  rm -rf "$seeds"
done
cp "$src/fuzz/dictionaries/"*.dict "$OUT/"
