#!/usr/bin/env python3
"""fuzz_safetensors writes a broken invariant as a finding named after it (issue 23, item 22).

Plants two different invariants through the target's test seam (MXDIFF_FUZZ_SAFETENSORS_PLANT)
on corpus files that reach them, and checks each run aborts with a finding whose signature is
`invariant/<that name>`, written to MXDIFF_FINDINGS_DIR (the .txt the campaign reads) and
printed (`==mxdiff== FINDING`), and that the two signatures differ. Unplanted, the same files
replay clean. The bundle form (several files in one input, `MXSB`, fuzz/README.md) reaches the
checks of an index and its shards: two of them are planted on bundle seeds the same way, and
(in the plain replay build, which reports rejected inputs) malformed bundles are rejected.
Every invariant runs and every broken one is kept: two planted on one input (a comma between
their names) give one finding, the first's, whose description names the second's signature too.

  fuzz_safetensors_signature_test.py FUZZ_SAFETENSORS_BINARY CORPUS_DIR
"""
import glob
import os
import struct
import subprocess
import sys
import tempfile

# (planted invariant, corpus file that reaches it)
PLANTS = (
    ("scan-histogram", "real-deepseek-v4-layer.safetensors"),
    ("error-names-file", "broken-not-json.safetensors"),
    ("bundle-index-accounted", "bundle-missing-shard-and-stray.mxsb"),
    ("bundle-copies-refuse-layer", "bundle-name-in-two-files.mxsb"),
)


def bundle(files, count=None):
    blob = b"MXSB" + bytes([len(files) if count is None else count])
    for name, data in files:
        blob += bytes([len(name)]) + name + struct.pack("<I", len(data)) + data
    return blob


# (two invariants planted together, corpus file that reaches both): the finding is the first's and
# names the second's signature.
PLANTED_TOGETHER = (
    (("scan-histogram", "text-report"), "real-deepseek-v4-layer.safetensors"),
    (("bundle-index-accounted", "bundle-copies-are-error"), "bundle-missing-shard-and-stray.mxsb"),
)


# Malformed bundles: each must be rejected (not a valid input), never audited.
MALFORMED = {
    "trailing byte": bundle([(b"a.safetensors", b"x")]) + b"\0",
    "no files": bundle([]),
    "a count beyond the files": bundle([(b"a.safetensors", b"x")], count=2),
    "a length beyond the input": bundle([(b"a.safetensors", b"x")])[:-1],
    "a name with a slash": bundle([(b"../a.safetensors", b"x")]),
    "a name starting with a dot": bundle([(b".a.safetensors", b"x")]),
    "an empty name": bundle([(b"", b"x")]),
    "a name twice": bundle([(b"a.safetensors", b"x"), (b"a.safetensors", b"y")]),
    "nine files": bundle([(b"f%d" % i, b"") for i in range(9)]),
}


def run(binary, corpus, name, plant, work):
    env = dict(os.environ, MXDIFF_FINDINGS_DIR=os.path.join(work, "findings"))
    env.pop("MXDIFF_FUZZ_SAFETENSORS_PLANT", None)
    if plant:
        env["MXDIFF_FUZZ_SAFETENSORS_PLANT"] = plant
    # cwd: libFuzzer writes its crash-* artifact there.
    return subprocess.run([binary, os.path.join(corpus, name)], cwd=work, env=env, capture_output=True, text=True,
                          errors="replace", timeout=120)


def main():
    binary, corpus = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    failures = []
    signatures = []
    for plant, name in PLANTS:
        with tempfile.TemporaryDirectory() as work:
            clean = run(binary, corpus, name, None, work)
            if clean.returncode != 0:
                failures.append(f"{name} unplanted: exit {clean.returncode}\n{clean.stderr[-2000:]}")
            result = run(binary, corpus, name, plant, work)
            expected = f"invariant/{plant}"
            texts = glob.glob(os.path.join(work, "findings", "*.txt"))
            firsts = [open(t, errors="replace").readline().strip() for t in texts]
            if result.returncode == 0:
                failures.append(f"{name} with {plant} planted: exit 0, no finding\n{result.stderr[-2000:]}")
            if firsts != [f"signature: {expected}"]:
                failures.append(f"{name} with {plant} planted: finding files say {firsts}, expected one with "
                                f"'signature: {expected}'\n{result.stderr[-2000:]}")
            if f"==mxdiff== FINDING {expected}" not in result.stderr:
                failures.append(f"{name} with {plant} planted: stderr does not report FINDING {expected}\n"
                                f"{result.stderr[-2000:]}")
            if f"invariant {plant} broken" not in result.stderr:
                failures.append(f"{name} with {plant} planted: the description does not name the invariant")
            signatures += firsts
    for (first, second), name in PLANTED_TOGETHER:
        with tempfile.TemporaryDirectory() as work:
            result = run(binary, corpus, name, f"{first},{second}", work)
            texts = glob.glob(os.path.join(work, "findings", "*.txt"))
            contents = [open(t, errors="replace").read() for t in texts]
            if result.returncode == 0 or len(contents) != 1:
                failures.append(f"{name} with {first} and {second} planted: exit {result.returncode}, "
                                f"{len(contents)} finding files\n{result.stderr[-2000:]}")
            elif not contents[0].startswith(f"signature: invariant/{first}\n") or \
                    f"also: invariant/{second}" not in contents[0]:
                failures.append(f"{name} with {first} and {second} planted: the finding is not {first}'s naming "
                                f"invariant/{second}:\n{contents[0][:2000]}")
    with tempfile.TemporaryDirectory() as work:
        valid = os.path.join(work, "valid.mxsb")
        with open(valid, "wb") as f:
            f.write(bundle([(b"model.safetensors", b"\x02" + b"\0" * 7 + b"{}")]))
        replay = subprocess.run([binary, valid], cwd=work, capture_output=True, text=True, errors="replace")
        if replay.returncode != 0:
            failures.append(f"a valid one-file bundle: exit {replay.returncode}\n{replay.stderr[-2000:]}")
        if "replayed" in replay.stdout:  # the plain replay build: it exits 2 for a rejected input
            for what, blob in MALFORMED.items():
                path = os.path.join(work, "bad.mxsb")
                with open(path, "wb") as f:
                    f.write(blob)
                result = subprocess.run([binary, path], cwd=work, capture_output=True, text=True, errors="replace")
                if result.returncode != 2 or "not a valid case" not in result.stderr:
                    failures.append(f"a bundle with {what}: exit {result.returncode}, not rejected\n{result.stderr[-500:]}")
    if len(set(signatures)) != len(PLANTS):
        failures.append(f"two invariants gave the signatures {signatures}: not two different ones")
    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        print(f"ok: {', '.join(signatures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
