#!/usr/bin/env python3
"""Writes the audit tests' checkpoints with the official `safetensors` package (PyPI) and
`ml_dtypes`' float8_e8m0fnu, so that the C++ parser is tested on files the reference
implementation wrote. Run by ctest (fixture `audit_fixtures`) into the build folder:

  write_fixtures.py OUT_DIR --mxdiff PATH [--seed N]

The admitted scale bytes are asked of the built `mxdiff transform-table` (the derivation in
reference/admission.cc), never typed here; "raw 113..128" below is what it answers today.

OUT_DIR/
  deepseek/     a scaled-down DeepSeek V4 checkpoint, 3 shards + model.safetensors.index.json:
                4 layers x 4 routed experts (w1/w3 [64, 256] codes, w2 [256, 64]) and a shared
                expert, packed I8 weights, F8_E8M0 scales raw 113..128 except what is planted:
                layer 1 one raw 112 (W13), layer 2 one raw 0xFF (W2), layer 3 one scale
                whose shape disagrees with its weight (W2); layer 1's expert 3 and the shared
                expert of layer 0 are split across shards (scale in one, weight in another);
                layer 0 also has an FP8 attention weight with 128-block E8M0 scales (no kernel
                layer) and an F32 norm.
  gptoss.safetensors   gpt-oss naming: U8 *_blocks / *_scales, 2 layers x 4 experts, layer 1's
                down_proj with one raw 129.
  clean/model.safetensors   one DeepSeek layer with U8 `.scale` tensors, all admitted.
  decode_table.safetensors  every E8M0 byte and every E2M1 code with ml_dtypes' values (float64).
  expected.json  what was planted and numpy's histogram of every scale tensor and kernel layer,
                 the oracle the C++ tests compare the audit with.
"""
import argparse
import csv
import io
import json
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

LAYERS, EXPERTS, HIDDEN, INTER = 4, 4, 256, 64
ADMITTED = None  # (first, last) raw byte of the fold admission set, from admitted_range()


def admitted_range(mxdiff):
    """The admitted raw bytes as `mxdiff transform-table` derives them: one contiguous range."""
    table = subprocess.run([mxdiff, "transform-table"], check=True, capture_output=True, text=True).stdout
    raws = sorted({int(row["raw"]) for row in csv.DictReader(io.StringIO(table)) if row["admitted"] == "1"})
    if not raws or raws != list(range(raws[0], raws[-1] + 1)):
        sys.exit(f"write_fixtures: mxdiff transform-table admits no single range of raw bytes: {raws}")
    return raws[0], raws[-1]


def e8m0(raw):
    return np.ascontiguousarray(raw, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu)


class Writer:
    def __init__(self, rng):
        self.rng = rng
        self.expected = {"tensors": {}, "layers": {}, "planted": []}

    def scales(self, shape, name):
        raw = self.rng.integers(ADMITTED[0], ADMITTED[1] + 1, size=shape, dtype=np.uint8)
        return raw

    def codes(self, shape):
        return self.rng.integers(-128, 128, size=shape, dtype=np.int8)

    def record(self, name, raw, layer):
        counts = np.bincount(raw.reshape(-1), minlength=256)
        self.expected["tensors"][name] = {"histogram": {str(i): int(c) for i, c in enumerate(counts) if c},
                                          "layer": layer}
        if layer is not None:
            total = self.expected["layers"].setdefault(layer, {"histogram": [0] * 256, "tensors": []})
            total["histogram"] = [a + int(b) for a, b in zip(total["histogram"], counts)]
            total["tensors"].append(name)


def write_deepseek(out, writer):
    folder = os.path.join(out, "deepseek")
    os.makedirs(folder, exist_ok=True)
    shards = [{}, {}, {}]
    raws = {}
    for layer in range(LAYERS):
        shard = shards[0] if layer < 2 else shards[1]
        for expert in range(EXPERTS):
            for w, (n, k) in (("w1", (INTER, HIDDEN)), ("w2", (HIDDEN, INTER)), ("w3", (INTER, HIDDEN))):
                base = f"layers.{layer}.ffn.experts.{expert}.{w}"
                raw = writer.scales((n, k // 32), base)
                if layer == 3 and expert == 1 and w == "w2":
                    raw = writer.scales((n, k // 32 + 1), base)  # disagrees with the weight's K
                raws[base] = raw
                target = shards[2] if (layer == 1 and expert == 3) else shard
                weight_target = shards[0] if (layer == 1 and expert == 3) else shard
                target[base + ".scale"] = raw
                weight_target[base + ".weight"] = writer.codes((n, k // 2))
        for w, (n, k) in (("w1", (INTER, HIDDEN)), ("w2", (HIDDEN, INTER)), ("w3", (INTER, HIDDEN))):
            base = f"layers.{layer}.ffn.shared_experts.{w}"
            raws[base] = writer.scales((n, k // 32), base)
            (shards[2] if layer == 0 else shard)[base + ".scale"] = raws[base]
            shard[base + ".weight"] = writer.codes((n, k // 2))
        shard[f"layers.{layer}.attn_norm.weight"] = writer.rng.standard_normal(HIDDEN).astype(np.float32)
    # An FP8 weight with 128 x 128 block scales, as V4-Flash's attention: no kernel layer.
    shards[0]["layers.0.attn.wq_a.weight"] = writer.rng.standard_normal((128, HIDDEN)).astype(ml_dtypes.float8_e4m3fn)
    raws["layers.0.attn.wq_a"] = np.array([[120, 121]], dtype=np.uint8)
    shards[0]["layers.0.attn.wq_a.scale"] = raws["layers.0.attn.wq_a"]

    # Just below the admitted range, and the NaN byte.
    planted = [("layers.1.ffn.experts.2.w3", (5, 3), ADMITTED[0] - 1, "layers.1.ffn.experts.W13"),
               ("layers.2.ffn.experts.0.w2", (100, 1), 255, "layers.2.ffn.experts.W2")]
    for base, position, value, layer in planted:
        raws[base][position] = value
        writer.expected["planted"].append({"tensor": base + ".scale", "position": list(position), "raw": value,
                                           "layer": layer})
    writer.expected["shape_mismatch"] = {"tensor": "layers.3.ffn.experts.1.w2.scale",
                                         "layer": "layers.3.ffn.experts.W2"}

    for base, raw in raws.items():
        if ".attn." in base:
            layer = None
        else:  # the MXFP4 shared expert is the routed layer's last group (checkpoint/README.md)
            prefix = base.split(".ffn.")[0]
            layer = f"{prefix}.ffn.experts.{'W2' if base.endswith('w2') else 'W13'}"
        writer.record(base + ".scale", raw, layer)

    weight_map = {}
    for index, shard in enumerate(shards):
        name = f"model-{index + 1:05d}-of-{len(shards):05d}.safetensors"
        tensors = {key: (e8m0(value) if key.endswith(".scale") else value) for key, value in shard.items()}
        save_file(tensors, os.path.join(folder, name), metadata={"format": "pt"})
        weight_map.update({key: name for key in shard})
    total = sum(int(np.asarray(v).nbytes) for shard in shards for v in shard.values())
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as index:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, index, indent=2)


def write_gptoss(out, writer):
    tensors = {}
    for layer in range(2):
        prefix = f"model.layers.{layer}.mlp.experts"
        for projection, (n, k) in (("gate_up_proj", (2 * INTER, HIDDEN)), ("down_proj", (HIDDEN, INTER))):
            raw = writer.scales((EXPERTS, n, k // 32), projection)
            if layer == 1 and projection == "down_proj":
                raw[2, 7, 1] = ADMITTED[1] + 1  # just above the admitted range
                writer.expected["planted"].append({"tensor": f"{prefix}.{projection}_scales", "position": [2, 7, 1],
                                                   "raw": ADMITTED[1] + 1, "layer": f"{prefix}.W2"})
            tensors[f"{prefix}.{projection}_scales"] = raw
            tensors[f"{prefix}.{projection}_blocks"] = writer.rng.integers(0, 256, size=(EXPERTS, n, k // 32, 16),
                                                                          dtype=np.uint8)
            writer.record(f"{prefix}.{projection}_scales", raw,
                          f"{prefix}.{'W13' if projection == 'gate_up_proj' else 'W2'}")
        tensors[f"model.layers.{layer}.mlp.router.weight"] = writer.rng.standard_normal((EXPERTS, HIDDEN)).astype(np.float16)
    save_file(tensors, os.path.join(out, "gptoss.safetensors"))


def write_clean(out, rng):
    folder = os.path.join(out, "clean")
    os.makedirs(folder, exist_ok=True)
    tensors = {}
    for expert in range(2):
        for w, (n, k) in (("w1", (INTER, HIDDEN)), ("w2", (HIDDEN, INTER)), ("w3", (INTER, HIDDEN))):
            base = f"layers.0.ffn.experts.{expert}.{w}"
            tensors[base + ".weight"] = rng.integers(0, 256, size=(n, k // 2), dtype=np.uint8)
            tensors[base + ".scale"] = rng.integers(ADMITTED[0], ADMITTED[1] + 1, size=(n, k // 32), dtype=np.uint8)
    save_file(tensors, os.path.join(folder, "model.safetensors"))


def write_decode_table(out):
    e8m0_bytes = np.arange(256, dtype=np.uint8)
    e2m1_codes = np.arange(16, dtype=np.uint8)
    save_file({"e8m0_bytes": e8m0_bytes,
               "e8m0_values": e8m0_bytes.view(ml_dtypes.float8_e8m0fnu).astype(np.float64),
               "e2m1_codes": e2m1_codes,
               "e2m1_values": e2m1_codes.view(ml_dtypes.float4_e2m1fn).astype(np.float64)},
              os.path.join(out, "decode_table.safetensors"),
              metadata={"ml_dtypes": ml_dtypes.__version__, "numpy": np.__version__})


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--mxdiff", required=True, help="the built mxdiff, asked for the admitted scale bytes")
    parser.add_argument("--seed", type=int, default=int(os.environ.get("MXDIFF_SEED", "20261208")))
    args = parser.parse_args()
    global ADMITTED
    ADMITTED = admitted_range(args.mxdiff)
    print(f"write_fixtures: seed {args.seed} (MXDIFF_SEED replays), admitted raw {ADMITTED[0]}..{ADMITTED[1]}"
          f" (from {args.mxdiff} transform-table), into {args.out}")
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    writer = Writer(rng)
    write_deepseek(args.out, writer)
    write_gptoss(args.out, writer)
    write_clean(args.out, rng)
    write_decode_table(args.out)
    writer.expected["seed"] = args.seed
    with open(os.path.join(args.out, "expected.json"), "w") as expected:
        json.dump(writer.expected, expected, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
