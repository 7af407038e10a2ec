#!/usr/bin/env bash
# On a GPU machine: `mxdiff gate` on a generated checkpoint with one full-size DeepSeek V4 layer
# (hidden 4096, intermediate 2048, 256 routed experts + the FP8 shared expert, about 3.4 GB), TP 4
# rank 0, three times: clean, a raw 112 planted in expert 17's w3 scale at [5, 3] (inside rank 0's
# W13 rows 0..511), a 0xFF planted in expert 42's w2 scale at [7, 2] (inside rank 0's W2 scale
# columns 0..15). The variants are copies of the clean shard with that one byte rewritten (the
# generator takes a minute a layer; a copy seconds). First, gate_cli_test.py (the ctest gate_cli)
# on small generated checkpoints, which on a GPU also checks the device steps and the fallback.
# DIR is a build folder (tools/mxdiff/mxdiff) or a folder holding mxdiff, with runtime-libs/
# where the machine lacks the build's libraries (tools/gpu/collect_runtime_libs.sh); the flags
# after DIR go to every full-size gate (e.g. --budget_s=5). Run from the repository's root.
#
#   tools/gate/run_gate_on_gpu.sh DIR [GATE FLAGS...]
#
# GATE_SMALL=0 leaves out the small checkpoints' test; GATE_VARIANTS (default "clean raw112 nan")
# chooses the full-size runs; GATE_WORK (default /tmp/gate-v4) holds the checkpoints (a clean one
# there is reused); GATE_LAYERS (default 1) full-size layers in the checkpoint (with more, pass
# --layers=all and a --speed_time to time each layer's whole graph within a budget).
# Writes to $OUT (or ./gate-out): gate-clean/, gate-raw112/, gate-nan/ (report.md, report.json,
# bench.json, the figures) and each gate's log. Exit status: the clean gate's.
set -uo pipefail
dir=${1:?usage: $0 DIR [GATE FLAGS...]}
shift
out=${OUT:-gate-out}
work=${GATE_WORK:-/tmp/gate-v4}
mkdir -p "$out" "$work"
export LD_LIBRARY_PATH="$dir/runtime-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mxdiff=$dir/tools/mxdiff/mxdiff
[ -x "$mxdiff" ] || mxdiff=$dir/mxdiff
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$out/gpu.txt"
if [ "${GATE_SMALL:-1}" != 0 ]; then
  for variant in "clean|" "raw112_rank0|--defect=raw112:0:3:5:2" "raw112_rank3|--defect=raw112:0:3:100:2" \
                 "nan_rank0|--defect=nan:1:5:7:0" "missing_w3|--defect=missing-w3:0:2" "scale_shape|--defect=scale-shape:0:1"; do
    python3 tests/checkpoint/write_v4_checkpoint.py "$work/small/${variant%%|*}" --layers 2 --experts 8 --hidden 256 \
      --intermediate 128 --shared=mxfp4 ${variant#*|} || exit 2
  done
  fakes=$dir/tests/tools/gate  # the kernel libraries of the two-library cases (gate_fake_kernel.cc)
  timeout 300 python3 tests/tools/gate/gate_cli_test.py --mxdiff "$mxdiff" --checkpoints "$work/small" \
    --schema tools/gate/report.schema.json --example-kernel "$dir/fuzz/libmxdiff_example_kernel.so" \
    --fake-v1 "$fakes/libmxdiff_gate_fake_v1.so" --fake-folded-only "$fakes/libmxdiff_gate_fake_folded_only.so" \
    --fake-flip-folded "$fakes/libmxdiff_gate_fake_flip_folded.so" >"$out/gate_cli.log" 2>&1
  rc=$?
  echo "== gate_cli (small checkpoints): exit $rc ($(grep -c '^FAIL' "$out/gate_cli.log") failed checks; $out/gate_cli.log)"
  grep '^FAIL' "$out/gate_cli.log" | head -20
fi
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
start=$(date +%s%N)
layers=${GATE_LAYERS:-1}
clean=$work/clean
[ "$layers" = 1 ] || clean=$work/clean-$layers-layers
if [ ! -f "$clean/defects.json" ]; then  # a checkpoint generated before is reused
  python3 tests/checkpoint/write_v4_checkpoint.py "$clean" --layers "$layers" --shared fp8 || exit 2
fi
echo "checkpoint ready in $(ms "$start") ms" | tee "$out/generate.log"
plant() {  # plant NAME TENSOR ROW COLUMN VALUE: a copy of the clean checkpoint with one scale byte rewritten
  rm -rf "$work/$1" && cp -r "$clean" "$work/$1" || exit 2
  python3 - "$work/$1" "$2" "$3" "$4" "$5" <<'PY' || exit 2
import json, struct, sys
folder, tensor, row, column, value = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
shard = json.load(open(f"{folder}/model.safetensors.index.json"))["weight_map"][tensor]
with open(f"{folder}/{shard}", "r+b") as file:
    length = struct.unpack("<Q", file.read(8))[0]
    entry = json.loads(file.read(length))[tensor]
    rows, columns = entry["shape"]
    assert 0 <= row < rows and 0 <= column < columns, (tensor, entry["shape"])
    file.seek(8 + length + entry["data_offsets"][0] + row * columns + column)
    file.write(bytes([value]))
print(f"{folder}: {tensor} [{row}, {column}] = {value}")
PY
}
variants=${GATE_VARIANTS:-clean raw112 nan}
[[ " $variants " == *" raw112 "* ]] && plant raw112 layers.0.ffn.experts.17.w3.scale 5 3 112
[[ " $variants " == *" nan "* ]] && plant nan layers.0.ffn.experts.42.w2.scale 7 2 255
status=0
for variant in $variants; do
  begin=$(date +%s%N)
  checkpoint=$work/$variant
  [ "$variant" = clean ] && checkpoint=$clean
  "$mxdiff" gate "$checkpoint" --tp=4 --rank=0 --report="$out/gate-$variant" --seed=20261205 "$@" \
    >"$out/gate-$variant.log" 2>&1
  rc=$?
  [ "$variant" = clean ] && status=$rc
  echo "== $variant: exit $rc in $(ms "$begin") ms"
  grep -E "^gate: \[|^mxdiff gate" "$out/gate-$variant.log"
done
exit "$status"
