#!/usr/bin/env python3
"""Writes a DeepSeek V4-shaped MXFP4 checkpoint with the official `safetensors` package and
`ml_dtypes` (tools/python-requirements.txt), for the audit, the weight loader and the gate:

  write_v4_checkpoint.py OUT_DIR [--layers N] [--experts 256] [--hidden 4096]
                         [--intermediate 2048] [--shared fp8|mxfp4|none] [--seed S]
                         [--defect KIND:LAYER:EXPERT[:ROW:COLUMN] ...]

Names, shapes and shard layout as checkpoint/README.md documents them for V4-Flash: one shard
per layer, `model-0000i-of-0000N.safetensors`, and `model.safetensors.index.json`; routed experts
`layers.{i}.ffn.experts.{e}.w1|w3.weight` I8 [intermediate, hidden/2] and w2 [hidden,
intermediate/2] (two E2M1 codes a byte), each with `.scale` F8_E8M0 [rows, K/32] (one byte per 32
codes along K), raw bytes drawn uniformly from 114..126 (the seed checkpoint's span). The shared
expert `layers.{i}.ffn.shared_experts.w1|w2|w3`: FP8 (F8_E4M3 with 128 x 128 block scales, as
V4-Flash has it: no kernel layer), MXFP4 like a routed expert, or none. Defaults are the real
sizes (about 3.2 GB a layer); the tests pass small ones.

Defects (EXPERT a number, or `shared` for the shared expert where it is MXFP4):
ROW:COLUMN places a raw112 or nan byte in the scale tensor (e.g. inside one tensor-parallel rank's
slice: w3's rows [r I/tp, (r+1) I/tp), w2's scale columns [r I/tp/32, (r+1) I/tp/32)); by default
it is drawn at random.
  raw112        one raw 112 in the expert's w3 scale (flushed by the ordinary transform)
  nan           one raw 0xFF (NaN) in the expert's w2 scale
  missing-w3    the expert's w3 weight and scale left out
  scale-shape   the expert's w3 scale one column short of its weight's K/32
  expert-shape  the expert's w1, w3 and w2 of half the intermediate size (consistent in
                itself, unlike the other experts)
OUT_DIR/defects.json lists each defect with its tensor and position (row, column).
"""
import argparse
import json
import os
import sys

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

SCALE_RAW = (114, 126)  # the seed checkpoint's span of raw E8M0 bytes
BLOCK = 32
KINDS = ("raw112", "nan", "missing-w3", "scale-shape", "expert-shape")


def e8m0(raw):
    return np.ascontiguousarray(raw, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu)


def parse_defect(text, layers, experts):
    parts = text.split(":")
    if len(parts) not in (3, 5) or parts[0] not in KINDS:
        raise ValueError(f"--defect={text}: use KIND:LAYER:EXPERT[:ROW:COLUMN] with KIND one of {', '.join(KINDS)}")
    kind, layer, expert = parts[0], int(parts[1]), parts[2]
    position = (int(parts[3]), int(parts[4])) if len(parts) == 5 else None
    if not 0 <= layer < layers:
        raise ValueError(f"--defect={text}: layer {layer} is not in 0..{layers - 1}")
    if expert != "shared" and not 0 <= int(expert) < experts:
        raise ValueError(f"--defect={text}: expert {expert} is not in 0..{experts - 1} or shared")
    return kind, layer, expert, position


class Layer:
    def __init__(self, args, rng, index, defects):
        self.args, self.rng, self.index = args, rng, index
        self.defects = [(kind, expert) for kind, layer, expert, _ in defects if layer == index]
        self.positions = {(kind, expert): at for kind, layer, expert, at in defects if layer == index and at}
        self.tensors = {}
        self.planted = []

    def has(self, kind, expert):
        return (kind, str(expert)) in self.defects

    def projection(self, stem, rows, k, expert, name):
        codes = self.rng.integers(-128, 128, size=(rows, k // 2), dtype=np.int8)
        scale_cols = k // BLOCK - (1 if name == "w3" and self.has("scale-shape", expert) else 0)
        raw = self.rng.integers(SCALE_RAW[0], SCALE_RAW[1] + 1, size=(rows, scale_cols), dtype=np.uint8)
        for kind, wanted, value in (("raw112", "w3", 112), ("nan", "w2", 0xFF)):
            if name == wanted and self.has(kind, expert):
                row, col = int(self.rng.integers(rows)), int(self.rng.integers(scale_cols))
                row, col = self.positions.get((kind, str(expert)), (row, col))
                if not (0 <= row < rows and 0 <= col < scale_cols):
                    raise ValueError(f"--defect {kind}: position ({row}, {col}) is outside {stem}.scale [{rows}, {scale_cols}]")
                raw[row, col] = value
                self.planted.append({"kind": kind, "layer": self.index, "expert": str(expert),
                                     "tensor": f"{stem}.scale", "row": row, "column": col, "raw": value})
        if name == "w3" and self.has("scale-shape", expert):
            self.planted.append({"kind": "scale-shape", "layer": self.index, "expert": str(expert),
                                 "tensor": f"{stem}.scale"})
        if name == "w3" and self.has("missing-w3", expert):
            self.planted.append({"kind": "missing-w3", "layer": self.index, "expert": str(expert),
                                 "tensor": f"{stem}.weight"})
            return
        self.tensors[f"{stem}.weight"] = codes
        self.tensors[f"{stem}.scale"] = e8m0(raw)

    def mxfp4_expert(self, prefix, expert):
        hidden, inter = self.args.hidden, self.args.intermediate
        if self.has("expert-shape", expert):
            inter //= 2
            self.planted.append({"kind": "expert-shape", "layer": self.index, "expert": str(expert),
                                 "tensor": f"{prefix}.w1.weight"})
        self.projection(f"{prefix}.w1", inter, hidden, expert, "w1")
        self.projection(f"{prefix}.w2", hidden, inter, expert, "w2")
        self.projection(f"{prefix}.w3", inter, hidden, expert, "w3")

    def fp8_expert(self, prefix):
        hidden, inter = self.args.hidden, self.args.intermediate
        for name, rows, cols in (("w1", inter, hidden), ("w2", hidden, inter), ("w3", inter, hidden)):
            self.tensors[f"{prefix}.{name}.weight"] = (
                self.rng.standard_normal((rows, cols), dtype=np.float32).astype(ml_dtypes.float8_e4m3fn))
            blocks = (-(-rows // 128), -(-cols // 128))
            self.tensors[f"{prefix}.{name}.scale"] = e8m0(self.rng.integers(114, 127, size=blocks, dtype=np.uint8))

    def build(self):
        p = f"layers.{self.index}.ffn"
        for e in range(self.args.experts):
            self.mxfp4_expert(f"{p}.experts.{e}", e)
        if self.args.shared == "mxfp4":
            self.mxfp4_expert(f"{p}.shared_experts", "shared")
        elif self.args.shared == "fp8":
            self.fp8_expert(f"{p}.shared_experts")
        self.tensors[f"layers.{self.index}.ffn_norm.weight"] = np.ones(self.args.hidden, dtype=np.float32)
        return self.tensors


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--experts", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--intermediate", type=int, default=2048)
    parser.add_argument("--shared", choices=("fp8", "mxfp4", "none"), default="fp8")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--defect", action="append", default=[])
    args = parser.parse_args()
    try:
        if args.layers < 1 or args.experts < 1:
            raise ValueError("--layers and --experts must be at least 1")
        if args.hidden % 64 or args.intermediate % 64:
            raise ValueError("--hidden and --intermediate must be multiples of 64 (two 32-blocks, for expert-shape)")
        defects = [parse_defect(d, args.layers, args.experts) for d in args.defect]
        for kind, _, expert, at in defects:
            if expert == "shared" and args.shared != "mxfp4":
                raise ValueError(f"--defect {kind}:...:shared needs --shared=mxfp4")
            shape = {"raw112": (args.intermediate, args.hidden // BLOCK), "nan": (args.hidden, args.intermediate // BLOCK)}
            if at and (kind not in shape or not all(0 <= v < n for v, n in zip(at, shape[kind]))):
                raise ValueError(f"--defect {kind}: a position is for raw112 (w3 scale) or nan (w2 scale), within "
                                 f"{shape.get(kind)}")
    except ValueError as error:
        print(f"write_v4_checkpoint.py: {error}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    weight_map, planted = {}, []
    for i in range(args.layers):
        layer = Layer(args, rng, i, defects)
        tensors = layer.build()
        shard = f"model-{i + 1:05d}-of-{args.layers:05d}.safetensors"
        save_file(tensors, os.path.join(args.out, shard), metadata={"format": "pt"})
        weight_map.update({name: shard for name in tensors})
        planted += layer.planted
        del tensors
    with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"generator": "tests/checkpoint/write_v4_checkpoint.py"}, "weight_map": weight_map}, f,
                  indent=1, sort_keys=True)
    with open(os.path.join(args.out, "defects.json"), "w") as f:
        json.dump({"layers": args.layers, "experts": args.experts, "hidden": args.hidden,
                   "intermediate": args.intermediate, "shared": args.shared, "defects": planted}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
