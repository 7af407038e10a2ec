#!/usr/bin/env python3
"""Writes the seeds of fuzz_safetensors (corpus/fuzz_safetensors/, corpus/README.md): small
files written by the official `safetensors` package (DeepSeek V4 and gpt-oss naming, every
dtype the numpy API takes, metadata, empty and zero-sized tensors), the same made broken in
each way the audit must reject (truncated, a header length beyond the file, invalid and
non-UTF-8 JSON, an unknown dtype, shape and byte size disagreeing, offsets out of range,
overlapping and reversed, a duplicate name, nesting, trailing bytes), index files, and bundles
(`bundle-*.mxsb`, fuzz/README.md: several files in one input, audited as a checkpoint folder).

  tests/checkpoint/write_fuzz_corpus.py corpus/fuzz_safetensors
"""
import json
import os
import struct
import sys

import ml_dtypes
import numpy as np
from safetensors.numpy import save

RNG = np.random.default_rng(20261208)


def e8m0(shape, low=114, high=126):
    return RNG.integers(low, high + 1, size=shape, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu)


def raw_file(header, data=b""):
    text = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + data


def split(blob):
    length = struct.unpack("<Q", blob[:8])[0]
    return json.loads(blob[8:8 + length]), blob[8 + length:]


def real_files():
    files = {}
    deepseek = {}
    for expert in range(2):
        for w, (n, k) in (("w1", (8, 64)), ("w2", (64, 8 * 4)), ("w3", (8, 64))):
            base = f"layers.0.ffn.experts.{expert}.{w}"
            deepseek[base + ".weight"] = RNG.integers(-128, 128, size=(n, k // 2), dtype=np.int8)
            deepseek[base + ".scale"] = e8m0((n, k // 32))
    for w, (n, k) in (("w1", (8, 64)), ("w2", (64, 32)), ("w3", (8, 64))):
        deepseek[f"layers.0.ffn.shared_experts.{w}.weight"] = RNG.integers(-128, 128, size=(n, k // 2), dtype=np.int8)
        deepseek[f"layers.0.ffn.shared_experts.{w}.scale"] = e8m0((n, k // 32))
    deepseek["layers.0.attn.wq_a.weight"] = RNG.standard_normal((16, 32)).astype(ml_dtypes.float8_e4m3fn)
    deepseek["layers.0.attn.wq_a.scale"] = e8m0((1, 1))
    files["real-deepseek-v4-layer.safetensors"] = save(deepseek, metadata={"format": "pt"})
    planted = dict(deepseek)
    raw = planted["layers.0.ffn.experts.1.w3.scale"].view(np.uint8).copy()
    raw[3, 1], raw[5, 0] = 112, 255
    planted["layers.0.ffn.experts.1.w3.scale"] = raw.view(ml_dtypes.float8_e8m0fnu)
    files["real-deepseek-v4-raw112-0xff.safetensors"] = save(planted)
    mismatch = dict(deepseek)
    mismatch["layers.0.ffn.experts.0.w2.scale"] = e8m0((64, 2))
    files["real-deepseek-v4-shape-mismatch.safetensors"] = save(mismatch)
    gptoss = {
        "model.layers.0.mlp.experts.gate_up_proj_blocks": RNG.integers(0, 256, size=(2, 8, 2, 16), dtype=np.uint8),
        "model.layers.0.mlp.experts.gate_up_proj_scales": RNG.integers(113, 129, size=(2, 8, 2), dtype=np.uint8),
        "model.layers.0.mlp.experts.down_proj_blocks": RNG.integers(0, 256, size=(2, 32, 1, 16), dtype=np.uint8),
        "model.layers.0.mlp.experts.down_proj_scales": RNG.integers(100, 160, size=(2, 32, 1), dtype=np.uint8),
    }
    files["real-gptoss-layer.safetensors"] = save(gptoss)
    dtypes = {name: np.zeros((2, 3), dtype=dtype) for name, dtype in (
        ("bool", np.bool_), ("u8", np.uint8), ("i8", np.int8), ("i16", np.int16), ("u16", np.uint16),
        ("f16", np.float16), ("i32", np.int32), ("u32", np.uint32), ("f32", np.float32), ("f64", np.float64),
        ("i64", np.int64), ("u64", np.uint64), ("bf16", ml_dtypes.bfloat16), ("e4m3", ml_dtypes.float8_e4m3fn),
        ("e5m2", ml_dtypes.float8_e5m2), ("e8m0", ml_dtypes.float8_e8m0fnu))}
    files["real-every-dtype.safetensors"] = save(dtypes)
    files["real-zero-sized.safetensors"] = save({"a.scale": e8m0((0, 4)), "a.weight": np.zeros((0, 64), np.int8),
                                                 "b": np.zeros((3,), np.uint8)})
    files["real-empty.safetensors"] = save({})
    return files


def broken_files(real):
    base = real["real-deepseek-v4-layer.safetensors"]
    header, data = split(base)
    files = {
        "broken-truncated-prefix.safetensors": base[:5],
        "broken-truncated-data.safetensors": base[:-40],
        "broken-header-length-beyond-file.safetensors": struct.pack("<Q", len(base)) + base[8:],
        "broken-header-length-huge.safetensors": struct.pack("<Q", 1 << 40) + base[8:],
        "broken-invalid-json.safetensors": raw_file(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]', b"x"),
        "broken-not-json.safetensors": raw_file(b"GGUF\x00\x01", b""),
        "broken-non-utf8.safetensors": raw_file(b'{"\xc3\x28":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"x"),
        "broken-deep-nesting.safetensors": raw_file(b'{"a":{"dtype":"U8","shape":[[[1]]],"data_offsets":[0,1]}}', b"x"),
        "broken-duplicate-name.safetensors": raw_file(
            b'{"a.scale":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
            b'"a.scale":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', b"xy"),
        "broken-trailing-bytes.safetensors": base + b"\x00\x00\x00",
    }
    def edited(name, edit):
        h = json.loads(json.dumps(header))
        edit(h)
        files[name] = raw_file(h, data)
    first = "layers.0.ffn.experts.0.w1.scale"
    edited("broken-unknown-dtype.safetensors", lambda h: h[first].update(dtype="F8_E9M9"))
    edited("broken-shape-size-mismatch.safetensors", lambda h: h[first].update(shape=[8, 3]))
    edited("broken-offsets-out-of-range.safetensors",
           lambda h: h[first].update(data_offsets=[len(data), len(data) + 16]))
    edited("broken-offsets-reversed.safetensors", lambda h: h[first].update(data_offsets=[16, 0]))
    second = "layers.0.ffn.experts.0.w1.weight"
    edited("broken-offsets-overlap.safetensors",
           lambda h: h[second].update(data_offsets=[h[second]["data_offsets"][0] - 1, h[second]["data_offsets"][1] - 1]))
    edited("broken-metadata-not-string.safetensors", lambda h: h.update(__metadata__={"format": 1}))
    edited("broken-negative-shape.safetensors", lambda h: h[first].update(shape=[-8, 2]))
    return files


def index_files():
    weight_map = {"layers.0.ffn.experts.0.w1.scale": "model-00001-of-00002.safetensors",
                  "layers.0.ffn.experts.0.w1.weight": "model-00002-of-00002.safetensors"}
    return {
        "index-valid.json": json.dumps({"metadata": {"total_size": 1234}, "weight_map": weight_map}).encode(),
        "index-escaping-shard.json": json.dumps({"weight_map": {"a": "../../etc/passwd"}}).encode(),
        "index-duplicate.json": b'{"weight_map":{"a":"x.safetensors","a":"y.safetensors"}}',
        "index-no-weight-map.json": b'{"metadata":{}}',
    }


def bundle(files):
    """The fuzz target's several-files form: b"MXSB", a count, then per file a name and its bytes."""
    blob = b"MXSB" + bytes([len(files)])
    for name, data in files.items():
        blob += bytes([len(name)]) + name.encode() + struct.pack("<I", len(data)) + data
    return blob


def moe_tensors(layer, experts, shared, low=114, high=126):
    tensors = {}
    names = [f"layers.{layer}.ffn.experts.{e}" for e in range(experts)]
    if shared:
        names.append(f"layers.{layer}.ffn.shared_experts")
    for base in names:
        for w, (n, k) in (("w1", (8, 64)), ("w2", (16, 32)), ("w3", (8, 64))):
            tensors[f"{base}.{w}.weight"] = RNG.integers(-128, 128, size=(n, k // 2), dtype=np.int8)
            tensors[f"{base}.{w}.scale"] = e8m0((n, k // 32), low, high)
    return tensors


def index_of(shards):
    weight_map = {name: shard for shard, tensors in shards.items() for name in tensors}
    return json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}).encode()


def bundle_files():
    files = {}
    # An index with two shards: layer 0's experts split across them (W13 and W2 span both).
    layer = moe_tensors(0, 2, shared=False)
    one = {k: v for k, v in layer.items() if ".experts.0." in k}
    two = {k: v for k, v in layer.items() if ".experts.1." in k}
    shards = {"model-00001-of-00002.safetensors": one, "model-00002-of-00002.safetensors": two}
    files["bundle-index-two-shards.mxsb"] = bundle({"model.safetensors.index.json": index_of(shards),
                                                    **{name: save(t) for name, t in shards.items()}})
    # Two layers' routed and shared experts split across shards: shard 1 holds layer 0's routed
    # experts and layer 1's shared expert, shard 2 the rest; one of layer 1's shared bytes is 0xFF.
    zero, first = moe_tensors(0, 2, shared=True), moe_tensors(1, 2, shared=True)
    raw = first["layers.1.ffn.shared_experts.w3.scale"].view(np.uint8).copy()
    raw[2, 1] = 255
    first["layers.1.ffn.shared_experts.w3.scale"] = raw.view(ml_dtypes.float8_e8m0fnu)
    shards = {
        "model-00001-of-00002.safetensors": {**{k: v for k, v in zero.items() if ".experts." in k},
                                             **{k: v for k, v in first.items() if ".shared_experts." in k}},
        "model-00002-of-00002.safetensors": {**{k: v for k, v in zero.items() if ".shared_experts." in k},
                                             **{k: v for k, v in first.items() if ".experts." in k}},
    }
    files["bundle-routed-shared-split.mxsb"] = bundle({"model.safetensors.index.json": index_of(shards),
                                                      **{name: save(t) for name, t in shards.items()}})
    # The index names a shard that is not there (its tensors are unread: their layer refused), and
    # a stray file beside the index that it does not name.
    named = dict(shards)
    named["model-00003-of-00003.safetensors"] = {"layers.2.ffn.experts.0.w1.scale": None}
    files["bundle-missing-shard-and-stray.mxsb"] = bundle({
        "model.safetensors.index.json": index_of(named),
        **{name: save(t) for name, t in shards.items()},
        "consolidated.safetensors": save(moe_tensors(5, 1, shared=False)),
    })
    # No index: a name in two files (the second copy holds 0x70): the layer is refused whichever copy
    # is read first.
    layer = moe_tensors(0, 1, shared=False)
    copy = {"layers.0.ffn.experts.0.w2.scale": e8m0((16, 1), 112, 112)}
    files["bundle-name-in-two-files.mxsb"] = bundle({"a.safetensors": save(layer), "b.safetensors": save(copy)})
    return files


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "corpus/fuzz_safetensors"
    os.makedirs(out, exist_ok=True)
    real = real_files()
    files = {**real, **broken_files(real), **index_files(), **bundle_files()}
    for name, blob in sorted(files.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(blob)
    print(f"write_fuzz_corpus: {len(files)} files into {out}, the largest {max(map(len, files.values()))} bytes")


if __name__ == "__main__":
    main()
