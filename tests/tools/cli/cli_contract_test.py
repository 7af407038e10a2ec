#!/usr/bin/env python3
"""The command-line contract of mxdiff's tools, table-driven: each case runs one tool on one
(mostly hostile) input and asserts its exit status (0 clean, 1 a finding, 2 bad input, 3 a
campaign worker that did not fuzz), what its output must say and must not say (a Python
traceback, an abort), under its own time limit: a hang fails its case, it never stalls the
suite. Run by ctest (tests/tools/cli/CMakeLists.txt); by hand:

  python3 tests/tools/cli/cli_contract_test.py --repo . --build build --fuzzing 0 \\
      --example-kernel build/fuzz/libmxdiff_example_kernel.so \\
      --test-kernel build/tests/tools/cli/libmxdiff_cli_test_kernel.so \\
      --hostile-kernel build/tests/tools/campaign/libmxdiff_hostile_kernel.so \\
      --not-a-kernel build/tests/tools/cli/libmxdiff_not_a_kernel_{no_entry,abi_999,null_entry,bad_name}.so [-k SUBSTRING]

Cases that need real libFuzzer binaries (the campaign fuzzing for a few seconds) run only with
--fuzzing 1 (the libFuzzer build's ctest); the others run in both builds.
"""
import json
import os
import re
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import contract_cases  # noqa: E402  (tests/tools/contract_cases.py: Case, run_cases, write, fake_fuzzer)
from contract_cases import fake_fuzzer, write  # noqa: E402

NEVER = [r"Traceback \(most recent call last\)", r"terminate called", r"std::__ios_failure", r"bad_alloc",
         r"AddressSanitizer", r"runtime error:"]


class Case(contract_cases.Case):
    """A case of this test: 30 s unless told, never the patterns in NEVER; its check is called with
    the output."""

    def __init__(self, name, argv, status, says=(), never=(), timeout=30, env=None, needs=None, **kwargs):
        super().__init__(name, argv, status, says, list(never) + NEVER, timeout, env, **kwargs)
        self.needs = needs


def v1_case(n, k, rows, activations, codes, scales, model=0, request=0, tactic=(8, 8, 32, 1, 0)):
    """A case in format version 1 (fuzz/README.md), one group, no registry."""
    header = b"MXDF" + struct.pack("<BBHHBBB", 1, 1, n, k, model, request, 0)
    header += struct.pack("<HHHHB", *tactic) + struct.pack("<B", 0) + struct.pack("<B", rows)
    assert len(activations) == rows * k and len(codes) == n * k // 2 and len(scales) == n * k // 32
    return header + struct.pack(f"<{rows * k}H", *activations) + bytes(codes) + bytes(scales)


def lcg(seed):
    state = seed
    while True:
        state = (state * 6364136223846793005 + 1442695040888963407) % 2 ** 64
        yield state >> 33


def moderate_f16(gen):
    value = next(gen)
    return ((value & 1) << 15) | ((8 + value % 14) << 10) | ((value >> 8) & 0x3FF)


def build_cases(opt, tmp):
    repo, build = opt.repo, opt.build
    mxdiff = os.path.join(build, "tools", "mxdiff", "mxdiff")
    repro = os.path.join(build, "tools", "repro", "repro")
    campaign = [sys.executable, os.path.join(repo, "tools", "campaign", "campaign")]
    run_job = [os.path.join(repo, "run")]
    vectors = sorted(f for f in os.listdir(os.path.join(repo, "tests", "vectors")) if f.startswith("v100_"))
    has_gpu = any(os.access(os.path.join(d, "nvidia-smi"), os.X_OK) for d in os.get_exec_path()) and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    cases = []

    # --- mxdiff: help, flags, commands, hostile files.
    cases += [
        Case("mxdiff --help lists the commands", [mxdiff, "--help"], 0,
             ["vectors", "transform-table", "self-check", "calibrate", "COMMAND --help"]),
        Case("mxdiff alone is bad usage", [mxdiff], 2, ["usage: mxdiff COMMAND"]),
        Case("mxdiff vectors --help lists its flags", [mxdiff, "vectors", "--help"], 0,
             [r"--model=VALUE", r"--max-failures=VALUE"], [r"--quiet", r"--warps"]),
        Case("mxdiff self-check --help lists its flags", [mxdiff, "self-check", "--help"], 0, [r"--\[no\]quiet"],
             [r"--model"]),
        Case("mxdiff calibrate --help lists its flags", [mxdiff, "calibrate", "-h"], 0,
             ["--expect", "--write", "--seed", "--warps", "--steps"]),
        Case("mxdiff transform-table --help: no flags", [mxdiff, "transform-table", "--help"], 0, ["flags: none"]),
        Case("another command's flag is rejected", [mxdiff, "self-check", "--model=v100"], 2,
             [r"--model is not a flag of self-check \(it belongs to: vectors\)"]),
        Case("another command's bool flag is rejected", [mxdiff, "vectors", "--quiet", "--model=v100", "x.csv"], 2,
             [r"--quiet is not a flag of vectors \(it belongs to: self-check\)"]),
        Case("an unknown flag exits 2", [mxdiff, "vectors", "--bogus"], 2,
             [r"unknown flag --bogus", r"mxdiff vectors --help"]),
        Case("a malformed flag value exits 2", [mxdiff, "vectors", "--max_failures=x", "--model=v100", "f.csv"], 2,
             [r"--max_failures=x"]),
        Case("a flag without its value exits 2", [mxdiff, "vectors", "--model"], 2, [r"--model needs a value"]),
        Case("an unknown command exits 2", [mxdiff, "frobnicate"], 2, [r"unknown command 'frobnicate'"]),
        Case("mxdiff vectors /dev/zero fails fast", [mxdiff, "vectors", "--model=v100", "/dev/zero"], 2,
             [r"/dev/zero:1: line longer than 1024 KiB"], timeout=20),
        Case("mxdiff vectors DIR", [mxdiff, "vectors", "--model=v100", tmp], 2, [r"is a directory"]),
        Case("mxdiff vectors of a missing file", [mxdiff, "vectors", "--model=v100", "/nonexistent/v.csv"], 2,
             [r"/nonexistent/v.csv: cannot open"]),
        Case("mxdiff vectors of a binary file", [mxdiff, "vectors", "--model=v100",
                                                 write(os.path.join(tmp, "binary.csv"), bytes(range(256)) * 64)], 2,
             [r"binary.csv:\d+: "]),
        Case("mxdiff vectors of the V100 vectors", [mxdiff, "vectors", "--model=v100"]
             + [os.path.join(repo, "tests", "vectors", v) for v in vectors], 0, [r"\d+ passed, 0 failed"],
             timeout=60),
        Case("mxdiff self-check", [mxdiff, "self-check", "--quiet"], 0, [r"\d+ passed, 0 failed"], timeout=120),
    ]

    # --- repro: files that are not cases, flags, and what it explains.
    corpus_case = os.path.join(repo, "corpus", "fuzz_reference", sorted(os.listdir(os.path.join(repo, "corpus",
                                                                                                  "fuzz_reference")))[0])
    gen = lcg(11)
    nan_case = write(os.path.join(tmp, "nan.case"),
                     v1_case(8, 32, 1, [0x7E00] * 32, [next(gen) % 256 for _ in range(8 * 16)], [127] * 8))
    # 2^14 + 1.25 x 2^-10 - 2^14 + 1 in one step, weights 1.0 (code 2, scale 2^0): exact keeps the
    # small term (0x3c01), the V100's truncation drops it (0x3c00), so a kernel computing exact
    # differs from a v100 reference in every element.
    crafted = [0x7400, 0x1500, 0xF400, 0x3C00] + [0] * 28
    model_case = write(os.path.join(tmp, "v100-cancellation.case"),
                       v1_case(8, 32, 1, crafted, [0x22] * (8 * 16), [127] * 8, model=0))
    gen = lcg(13)
    transform_case = write(os.path.join(tmp, "refused.case"),
                           v1_case(8, 64, 1, [moderate_f16(gen) for _ in range(64)],
                                   [next(gen) % 256 for _ in range(8 * 32)], [100 + next(gen) % 40 for _ in range(16)],
                                   model=0, request=0))
    missing_regressions = os.path.join(tmp, "no-such-folder", "regressions")
    # The size bound at its edge: the largest case the format allows, as repro states it, and one byte more.
    bound = re.search(r"\((\d+) bytes at most\)", subprocess.run([repro, "/dev/zero"], capture_output=True, text=True,
                                                                 timeout=20).stderr)
    largest = int(bound.group(1)) if bound else 16
    at_bound = write(os.path.join(tmp, "at-bound.case"), b"MXDF" + bytes(largest - 4))
    past_bound = write(os.path.join(tmp, "past-bound.case"), b"MXDF" + bytes(largest - 3))
    cases += [
        Case("repro --help lists its flags", [repro, "--help"], 0,
             [r"--\[no\]emit", r"--regressions=VALUE", r"--external=VALUE", r"--show=VALUE"]),
        Case("repro without a file", [repro], 2, [r"no case file given"]),
        Case("repro DIR", [repro, tmp], 2, [r"is a directory, not a case file"]),
        Case("repro /dev/zero does not hang", [repro, "/dev/zero"], 2, [r"larger than any case can be"], timeout=20),
        Case("repro reads a file as large as the largest case", [repro, at_bound], 2,
             [r"is not a valid case: "] + ([] if bound else ["repro /dev/zero stated no bound"]),
             [r"larger than any case"], timeout=20),
        Case("repro rejects a file one byte larger", [repro, past_bound], 2,
             [rf"larger than any case can be \({largest} bytes at most\)"], timeout=20),
        Case("repro of a missing file", [repro, "/nonexistent/x.case"], 2, [r"cannot read /nonexistent/x.case"]),
        Case("repro of a file that is not a case", [repro, os.path.join(repo, "README.md")], 2,
             [r"is not a valid case"]),
        Case("repro with an unknown flag", [repro, corpus_case, "--bogus"], 2, [r"unknown flag --bogus"]),
        Case("repro --show=-1", [repro, corpus_case, "--show=-1"], 2, [r"--show=-1 must be >= 0"]),
        Case("repro --emit into a missing folder", [repro, corpus_case, "--emit", f"--regressions={missing_regressions}"],
             2, [r"does not exist; create it first"],
             check=lambda out: f"{missing_regressions} was created" if os.path.exists(
                 os.path.dirname(missing_regressions)) else None),
        Case("repro of a clean corpus case", [repro, corpus_case], 0, ["reproduced clean"], timeout=60),
        Case("repro --emit into an existing folder", [repro, corpus_case, "--emit",
                                                      f"--regressions={os.path.join(tmp, 'emitted')}"], 0,
             [r"emitted .*emitted/"], before=lambda: os.makedirs(os.path.join(tmp, "emitted"), exist_ok=True),
             check=lambda out: None if any(f.endswith(".case") for f in os.listdir(os.path.join(tmp, "emitted")))
             else "no .case file in the --regressions folder", timeout=60),
        Case("repro: a NaN payload difference is one", [repro, nan_case, f"--external={opt.example_kernel}"], 1,
             [r"mismatch \[0\]\[4\] .*kernel 0x7ffe .*reference 0x7fff .*NaN payload difference",
              r"both are NaN: the kernel's payload is 0x7ffe"],
             [r"  mismatch .*65536 ulp"], env={"MXDIFF_EXAMPLE_KERNEL_FLIP": "1"}, timeout=60),
        Case("repro names the other transform, the module's model first",
             [repro, transform_case, f"--external={opt.test_kernel}"], 1,
             [r"other arithmetics that reproduce the kernel's bits:\n    folded under v100 \(the module's model\): "
              r"(\d+) of the \1 mismatching elements",
              r"(first divergent accumulation step|the traces differ only in the final rounding).*"
              r"folded under v100 \(the module's model\)|against folded under v100 \(the module's model\)"],
             env={"MXDIFF_TEST_KERNEL": "other-transform"}, timeout=60),
        Case("repro lists every model that reproduces, the one that explains all first",
             [repro, model_case, f"--external={opt.test_kernel}"], 1,
             [r"other arithmetics that reproduce the kernel's bits:\n    ordinary under exact: (\d+) of the \1 "
              r"mismatching elements", r"against ordinary under exact"],
             env={"MXDIFF_TEST_KERNEL": "model=exact"}, timeout=60),
    ]

    # --- repro --minimize on a real finding: the test kernel's planted defect (a flipped bit where
    # K >= 64) must survive, the case must shrink, and repro on FILE.min must find the same thing.
    gen = lcg(17)
    big_case = write(os.path.join(tmp, "minimize-me.case"),
                     v1_case(32, 128, 4, [moderate_f16(gen) for _ in range(4 * 128)],
                             [next(gen) % 256 for _ in range(32 * 64)], [120 + next(gen) % 10 for _ in range(32 * 4)]))
    planted = {"MXDIFF_TEST_KERNEL": "flip-if-k-at-least=64"}
    with open(corpus_case, "rb") as source:
        clean_copy = write(os.path.join(tmp, "clean-copy.case"), source.read())
    layer_case = os.path.join(repo, "corpus", "fuzz_layer", sorted(os.listdir(os.path.join(repo, "corpus",
                                                                                         "fuzz_layer")))[0])

    def repro_json(path):
        done = subprocess.run([repro, path, f"--external={opt.test_kernel}", "--json"], capture_output=True,
                              env=dict(os.environ, **planted), timeout=60)
        return done.returncode, json.loads(done.stdout)

    def minimized_check(output):
        minimized = big_case + ".min"
        if not os.path.exists(minimized):
            return f"no {minimized}"
        before, after = os.path.getsize(big_case), os.path.getsize(minimized)
        if after >= before:
            return f"{minimized} is {after} bytes, not smaller than the {before} bytes of the input"
        (status, original), (min_status, again) = repro_json(big_case), repro_json(minimized)
        if status != 1 or min_status != 1:
            return f"repro exit {status} on the input, {min_status} on the .min; expected 1 on both"
        first, kept = original["findings"][0]["signature"], again["findings"][0]["signature"]
        if kept != first:
            return f"the .min reproduces {kept}, the input {first}"
        return None

    def one_line(output):
        lines = output.strip().splitlines()
        return None if len(lines) == 1 else f"{len(lines)} lines of output, expected one"

    cases += [
        Case("repro --minimize shrinks a real finding and keeps its signature",
             [repro, big_case, f"--external={opt.test_kernel}", "--minimize"], 1,
             [r"FINDING mismatch/", r"minimized \(signature mismatch/\S+ kept; [1-9]\d* edits of \d+ candidates"],
             env=planted, check=minimized_check, timeout=300),
        # On a copy in the temporary folder: were the case not clean, the .min would land there, never in corpus/.
        Case("repro --minimize of a clean case says there is nothing to minimize", [repro, clean_copy, "--minimize"],
             0, [r"--minimize: nothing to minimize \(no finding reproduced\)"],
             check=lambda out: f"{clean_copy}.min was written" if os.path.exists(clean_copy + ".min") else None),
        Case("repro --minimize of a fuzz_layer case is refused", [repro, layer_case, "--minimize"], 2,
             [r"--minimize works on GEMM cases; .* is a fuzz_layer case"], check=one_line),
        Case("repro --json of a fuzz_layer case is refused", [repro, layer_case, "--json"], 2,
             [r"--json works on GEMM cases; .* is a fuzz_layer case"], check=one_line),
        Case("repro --minimize-evaluations=-1", [repro, corpus_case, "--minimize", "--minimize-evaluations=-1"], 2,
             [r"--minimize-evaluations=-1 must be >= 1"], check=one_line),
        Case("repro --minimize-evaluations=0", [repro, corpus_case, "--minimize", "--minimize-evaluations=0"], 2,
             [r"--minimize-evaluations=0 must be >= 1"], check=one_line),
        Case("repro --minimize-evaluations=x", [repro, corpus_case, "--minimize", "--minimize-evaluations=x"], 2,
             [r"--minimize_evaluations=x: "], check=one_line),
    ]

    # --- issue 34: a library that is not a kernel is bad input (exit 2) naming what is wrong, never a
    # finding; a module that declined the case did not check it (exit 3, never "clean"); a kernel that
    # writes its (const) inputs is a finding.
    no_entry, abi_999, null_entry, bad_name = opt.not_a_kernel
    cases += [
        Case(f"repro --external of a library {what}", [repro, corpus_case, f"--external={library}"], 2,
             [rf"^repro: --external: external kernel \S+: {says}"], [r"FINDING", r"calibration/no-model", r"reproduced"],
             check=one_line, timeout=60)
        for what, library, says in (("without mxdiff_kernel_entry", no_entry, r"no symbol mxdiff_kernel_entry"),
                                    ("of ABI 999", abi_999, r"ABI version 999, this build speaks 1 to 2"),
                                    ("whose entry returns null", null_entry, r"mxdiff_kernel_entry\(\) returned null"),
                                    ("whose kernel name has a space", bad_name, r'kernel name "my kernel" is not file-name safe'))
    ]
    gen = lcg(23)
    subnormal_case = write(os.path.join(tmp, "subnormal.case"),
                           v1_case(8, 32, 1, [0x0001, 0x83FF] + [moderate_f16(gen) for _ in range(30)],
                                   [next(gen) % 256 for _ in range(8 * 16)], [125] * 8))
    cases += [
        Case("repro of a case the module declined is not clean",
             [repro, corpus_case, f"--external={opt.hostile_kernel}"], 3,
             [r"^not checked: the module ext-hostile declined this case .*not clean \(exit 3\)$",
              r"^  the module does not support this case \(not a finding\): the hostile test kernel declines every case$"],
             [r"reproduced clean"], env={"MXDIFF_HOSTILE_KERNEL": "decline"}, timeout=60),
        Case("repro --json of a declined case names the module",
             [repro, corpus_case, f"--external={opt.hostile_kernel}", "--json"], 3,
             [r'"declined": \[\s*"ext-hostile"\s*\]', r'"exit_status": 3'], env={"MXDIFF_HOSTILE_KERNEL": "decline"},
             timeout=60),
        Case("repro of a kernel that flushes its subnormal inputs in place is a finding",
             [repro, subnormal_case, f"--external={opt.hostile_kernel}"], 1, [r"inputs-modified"],
             [r"reproduced clean"], env={"MXDIFF_HOSTILE_KERNEL": "flush-in-place"}, timeout=60),
    ]

    # --- repro --sequence: a kernel that goes wrong only after a problem with N=16 has run.
    gen = lcg(19)
    arming = v1_case(16, 32, 1, [moderate_f16(gen) for _ in range(32)], [next(gen) % 256 for _ in range(16 * 16)],
                     [125] * 16)
    failing = v1_case(8, 32, 1, [moderate_f16(gen) for _ in range(32)], [next(gen) % 256 for _ in range(8 * 16)],
                      [125] * 8)
    in_order, reversed_order, empty = (os.path.join(tmp, d) for d in ("seq.sequence", "rev.sequence", "empty.sequence"))
    for folder, first, second in ((in_order, arming, failing), (reversed_order, failing, arming)):
        os.makedirs(folder)
        write(os.path.join(folder, "000.case"), first)
        write(os.path.join(folder, "001.case"), second)
        write(os.path.join(folder, "notes.txt"), b"not a case: ignored")
    os.makedirs(empty)
    armed = {"MXDIFF_TEST_KERNEL": "flip-after-n=16"}
    cases += [
        Case("repro --sequence: a finding that needs the input before it",
             [repro, "--sequence", in_order, f"--external={opt.test_kernel}"], 1,
             [r"^000\.case: ok$", r"^001\.case: FINDING mismatch/", r"1 of 2 cases gave a finding"], env=armed,
             timeout=120),
        Case("repro --sequence: the same cases in the other order are clean",
             [repro, "--sequence", reversed_order, f"--external={opt.test_kernel}"], 0,
             [r"^000\.case: ok$", r"^001\.case: ok$", r"0 of 2 cases gave a finding"], env=armed, timeout=120),
        Case("repro of the sequence's last case alone is clean",
             [repro, os.path.join(in_order, "001.case"), f"--external={opt.test_kernel}"], 0, ["reproduced clean"],
             env=armed, timeout=60),
        Case("repro --sequence --json", [repro, "--sequence", in_order, f"--external={opt.test_kernel}", "--json"], 1,
             [r'"file": "001\.case"'], env=armed, timeout=120),
        Case("repro --sequence of a missing folder", [repro, "--sequence", "/nonexistent/x.sequence"], 2,
             [r"--sequence /nonexistent/x.sequence: no such directory"], check=one_line),
        Case("repro --sequence of a file", [repro, "--sequence", corpus_case], 2, [r"not a directory"],
             check=one_line),
        Case("repro --sequence of a folder without cases", [repro, "--sequence", empty], 2,
             [r"holds no \*\.case file"], check=one_line),
        Case("repro --sequence and a FILE", [repro, "--sequence", in_order, corpus_case], 2,
             [r"either a case FILE or --sequence DIR, not both"], check=one_line),
        Case("repro --sequence --minimize", [repro, "--sequence", in_order, "--minimize"], 2,
             [r"--minimize works on one case FILE"], check=one_line),
    ]

    # --- write errors: every command with its stdout on a full device (/dev/full) exits 2 with one
    # line saying so, never 0 with its output lost, never an abort.
    checkpoint = os.path.join(repo, "corpus", "fuzz_safetensors", "real-deepseek-v4-raw112-0xff.safetensors")
    gate_checkpoint = os.path.join(tmp, "gate-v4")  # a small consistent MoE layer for mxdiff gate
    subprocess.run([sys.executable, os.path.join(repo, "tests", "checkpoint", "write_v4_checkpoint.py"), gate_checkpoint,
                    "--experts", "4", "--hidden", "64", "--intermediate", "64", "--shared", "none"], check=True)
    lost = [r"cannot write the output to stdout: No space left on device"]
    full = [
        ("mxdiff --help", [mxdiff, "--help"]),
        ("mxdiff vectors", [mxdiff, "vectors", "--model=v100"] + [os.path.join(repo, "tests", "vectors", v)
                                                                  for v in vectors]),
        ("mxdiff transform-table", [mxdiff, "transform-table"]),
        ("mxdiff self-check", [mxdiff, "self-check", "--quiet"]),
        ("mxdiff audit", [mxdiff, "audit", checkpoint]),
        ("mxdiff audit --format=json", [mxdiff, "audit", "--format=json", checkpoint]),
        ("repro FILE", [repro, corpus_case]),
        ("repro --json", [repro, corpus_case, "--json"]),
        ("repro --help", [repro, "--help"]),
        ("repro --sequence", [repro, "--sequence", in_order, f"--external={opt.test_kernel}"]),
    ] + [(f"mxdiff {command} --help", [mxdiff, command, "--help"])
         for command in ("vectors", "transform-table", "self-check", "calibrate", "bench", "audit", "gate")]
    # Files repro writes, onto a full device (a symlink to /dev/full where the file goes): exit 2.
    full_min_case = write(os.path.join(tmp, "full-min.case"), open(big_case, "rb").read())
    os.symlink("/dev/full", full_min_case + ".min")
    with open(layer_case, "rb") as source:
        layer_bytes = source.read()
    fnv = 0xcbf29ce484222325
    for byte in layer_bytes:
        fnv = ((fnv ^ byte) * 0x100000001b3) % 2 ** 64
    layer_emit = os.path.join(tmp, "layer-emit")
    os.makedirs(os.path.join(layer_emit, "regressions"))
    os.makedirs(os.path.join(layer_emit, "fuzz_layer"))
    os.symlink("/dev/full", os.path.join(layer_emit, "fuzz_layer", f"regression-clean.{fnv:016x}.case"))
    cases += [
        Case("repro --minimize onto a full device", [repro, full_min_case, f"--external={opt.test_kernel}",
                                                     "--minimize"], 2, [r"--minimize: .*cannot write .*full-min\.case\.min"],
             env=planted, timeout=300),
        Case("repro --emit of a layer case onto a full device",
             [repro, layer_case, "--emit", f"--regressions={os.path.join(layer_emit, 'regressions')}"], 2,
             [r"--emit failed: cannot write .*regression-clean\.[0-9a-f]{16}\.case"], timeout=60),
    ]

    def last_line_only(output):  # repro --json's readable text goes to stderr: the failure is its last line
        lines = output.strip().splitlines()
        return None if lines and re.search(lost[0], lines[-1]) and sum(re.search(lost[0], line) is not None
                                                                         for line in lines) == 1 else \
            "the write failure is not one last line"

    cases += [
        Case("mxdiff vectors 2> /dev/full: exit 2, no abort", [mxdiff, "vectors", "--model=bogus", "x.csv"], 2,
             stderr="/dev/full"),
        Case("repro --json 2> /dev/full: exit 2, no abort", [repro, corpus_case, "--json"], 2, stderr="/dev/full"),
    ]
    cases += [Case(f"{name} > /dev/full", argv, 2, lost, stdout="/dev/full", env=armed,
                   check=last_line_only if "--json" in argv else one_line, timeout=120)
              for name, argv in full]
    # mxdiff gate's progress lines go to stderr before its verdict: the write failure is the last line.
    cases.append(Case("mxdiff gate > /dev/full", [mxdiff, "gate", gate_checkpoint, "--cases=2", "--seed=1"], 2, lost,
                      stdout="/dev/full", env=armed, check=last_line_only, timeout=120))

    # --- a FIFO nobody writes: refused at once (opening it would wait for a writer forever).
    fifo = os.path.join(tmp, "no-writer.fifo")
    os.mkfifo(fifo)
    fifo_sequence = os.path.join(tmp, "fifo.sequence")
    os.makedirs(fifo_sequence)
    os.mkfifo(os.path.join(fifo_sequence, "000.case"))
    cases += [
        Case("mxdiff vectors of a FIFO", [mxdiff, "vectors", "--model=v100", fifo], 2,
             [rf"{re.escape(fifo)}: not a regular file \(a FIFO\)"], check=one_line, timeout=10),
        Case("repro of a FIFO", [repro, fifo], 2, [rf"{re.escape(fifo)}: not a regular file \(a FIFO\)"],
             check=one_line, timeout=10),
        Case("repro --sequence with a FIFO in it", [repro, "--sequence", fifo_sequence], 2,
             [r"000\.case: not a regular file \(a FIFO\)"], check=one_line, timeout=10),
    ]

    # --- a path that is not UTF-8 (byte 0xFF): the JSON parses and gives the exact bytes back
    # (each byte outside UTF-8 as \udcXX, PEP 383's surrogateescape: os.fsencode undoes it).
    odd_dir = os.path.join(os.fsencode(tmp), b"odd-\xff-dir")
    os.makedirs(odd_dir)
    odd_case = os.path.join(odd_dir, b"case-\xfe\xff.case")
    odd_checkpoint = os.path.join(odd_dir, b"ckpt-\xff.safetensors")
    with open(corpus_case, "rb") as source:
        write(odd_case, source.read())
    with open(checkpoint, "rb") as source:
        write(odd_checkpoint, source.read())

    def json_names_bytes(argv, path, fields):
        """Runs argv, parses its stdout as JSON; every field (a function of the document) must decode
        to `path`'s exact bytes."""
        done = subprocess.run(argv, capture_output=True, timeout=60)
        try:
            document = json.loads(done.stdout)
        except ValueError as error:
            return f"stdout is not JSON ({error}): {done.stdout[:200]!r} {done.stderr[-300:]!r}"
        for field in fields:
            value = field(document)
            if not isinstance(value, str) or os.fsencode(value) != path:
                return f"{value!r} does not decode to {path!r}"
        return None

    repro_odd = [repro, os.fsdecode(odd_case), "--json"]
    audit_odd = [mxdiff, "audit", "--format=json", os.fsdecode(odd_checkpoint)]
    cases += [
        Case("repro --json of a path with byte 0xFF", repro_odd, 0, [r'"file": "'],
             check=lambda out: json_names_bytes(repro_odd, odd_case, [lambda d: d["file"]])),
        Case("audit --format=json of a path with byte 0xFF", audit_odd, 1, [r'"inputs":\["'],
             check=lambda out: json_names_bytes(audit_odd, odd_checkpoint,
                                                [lambda d: d["inputs"][0]] +
                                                [lambda d, i=i: d["tensors"][i]["file"] for i in range(1)])),
    ]

    # --- bench's runner mode and layer shapes are checked before the GPU is looked for.
    cases += [
        Case("bench --first_use=bogus", [mxdiff, "bench", "--first_use=bogus"], 2,
             [r"^mxdiff bench: (unknown --first_use 'bogus' \(table or tune\)|needs a CUDA build and a GPU)"],
             check=one_line, timeout=60),
        Case("bench --shapes=layer-tp4 with an external arm",
             [mxdiff, "bench", "--shapes=layer-tp4", "--arms=ordinary,ext:/nonexistent.so"], 2,
             [r"^mxdiff bench: (shape 'MoE layer PP2xTP4' is the whole MoE layer: it times builtin arms only|"
              r"needs a CUDA build and a GPU)"], check=one_line, timeout=60),
    ]

    # --- the GPU commands on a machine without a GPU: they say so (a CUDA build's runtime says "CUDA
    # driver version is insufficient" where no driver is installed, which reads like an old driver).
    if not has_gpu:
        no_gpu = [r"^mxdiff (bench|calibrate): (no GPU: this machine has no CUDA device|(needs a CUDA build and a GPU; )?"
                  r"this build has no CUDA)"]
        cases += [
            Case(f"mxdiff {command} without a GPU", [mxdiff, command], 2, no_gpu,
                 [r"driver version is insufficient", r"cudaGetDeviceCount: "], check=one_line, timeout=60)
            for command in ("bench", "calibrate")
        ]
        # mxdiff gate runs its CPU steps and skips the device ones: INCONCLUSIVE, exit 3.
        gate_report = os.path.join(tmp, "gate-report")
        cases.append(Case("mxdiff gate without a GPU", [mxdiff, "gate", gate_checkpoint, "--cases=2", "--seed=1",
                                                        f"--report={gate_report}"], 3,
                          [r"mxdiff gate: INCONCLUSIVE: not decided: exactness skipped \(no CUDA device"],
                          [r"driver version is insufficient", r"cudaGetDeviceCount: "], timeout=120))

    # --- the campaign: arguments, builds that cannot fuzz, workers that do not fuzz.
    out = os.path.join(tmp, "campaign-out")
    fake = os.path.join(tmp, "fake-build")
    os.makedirs(os.path.join(fake, "fuzz"))
    fake_fuzzer(os.path.join(fake, "fuzz", "fuzz_transform"),
                'echo "fuzz_transform: cannot start: something is missing" >&2; exit 2')
    fake_fuzzer(os.path.join(fake, "fuzz", "fuzz_dispatch"),
                'echo "#2\tINITED cov: 10 ft: 10 corp: 1/1b exec/s: 0 rss: 30Mb" >&2\n'
                'echo "stat::number_of_executed_units: 0" >&2; exit 0')
    fake_fuzzer(os.path.join(fake, "fuzz", "fuzz_reference"),
                'mkdir -p "$MXDIFF_FINDINGS_DIR/odd.txt"\n'
                'echo "#2\tINITED cov: 10 ft: 10 corp: 1/1b exec/s: 0 rss: 30Mb" >&2\n'
                'echo "stat::number_of_executed_units: 50" >&2; exit 0')
    if opt.fuzzing:  # an executable that is not libFuzzer, as the replay build's targets are
        replay_build = os.path.join(tmp, "replay-build")
        os.makedirs(os.path.join(replay_build, "fuzz"))
        with open(os.path.join(replay_build, "fuzz", "fuzz_transform"), "w") as replay:
            replay.write("#!/bin/sh\necho replayed 0 inputs\n")
        os.chmod(os.path.join(replay_build, "fuzz", "fuzz_transform"), 0o755)
    else:
        replay_build = build  # the real thing: this build's targets are replay binaries
    not_a_dir = write(os.path.join(tmp, "a-file"), b"x")
    partial_build = os.path.join(tmp, "partial-build")
    os.makedirs(os.path.join(partial_build, "fuzz"))
    cases += [
        Case("campaign --time 0", campaign + ["--time", "0"], 2, [r"argument --time: must be at least 1, got 0"]),
        Case("campaign --time -5", campaign + ["--time", "-5"], 2, [r"argument --time: must be at least 1, got -5"]),
        Case("campaign --time x", campaign + ["--time", "x"], 2, [r"argument --time: 'x' is not a whole number"]),
        Case("campaign --jobs 0", campaign + ["--jobs", "0"], 2, [r"argument --jobs: must be at least 1"]),
        Case("campaign --keep-going=1", campaign + ["--keep-going=1"], 2,
             [r"argument --keep-going: ignored explicit argument '1'"]),
        Case("campaign --mps=yes", campaign + ["--mps=yes"], 2, [r"argument --mps: ignored explicit argument 'yes'"]),
        Case("campaign --targets ,", campaign + ["--targets", ","], 2, [r"--targets ',' names no target"]),
        Case("campaign --targets bogus", campaign + ["--targets", "bogus"], 2, [r"unknown targets bogus"]),
        Case("campaign --out /etc/passwd", campaign + ["--out", "/etc/passwd"], 2,
             [r"--out /etc/passwd exists and is not a directory"]),
        Case("campaign --out under a file", campaign + ["--out", os.path.join(not_a_dir, "x")], 2,
             [r"is not a directory, so the folder cannot be created"]),
        Case("campaign --build-dir of a missing build", campaign + ["--build-dir", "/nonexistent", "--out", out], 2,
             [r"no fuzz build at /nonexistent", r"-DMXDIFF_FUZZING=ON"]),
        # The hint names a separate folder: the user's own build keeps its compiler and flags.
        Case("campaign --build-dir of a replay (non-fuzz) build",
             campaign + ["--build-dir", replay_build, "--targets", "fuzz_transform", "--out", out], 2,
             [r"fuzz_transform: not a libFuzzer binary", r"without -DMXDIFF_FUZZING=ON",
              rf"a separate folder: {re.escape(replay_build)} stays as it is", r"-B \S+/build-fuzz -G Ninja",
              r"campaign --build-dir \S+/build-fuzz"], [rf"-B {re.escape(replay_build)}\s"]),
        Case("campaign with a target not built", campaign + ["--build-dir", partial_build, "--targets", "fuzz_dispatch",
                                                             "--out", out], 2,
             [r"not built in .*partial-build: fuzz_dispatch; build them: ninja -C"]),
        Case("campaign --external of a missing file", campaign + ["--external", "/nonexistent/lib.so"], 2,
             [r"--external /nonexistent/lib.so: no such file"]),
        Case("campaign --external without fuzz_gemm",
             campaign + ["--external", opt.example_kernel, "--targets", "fuzz_reference"], 2,
             [r"--external is fuzzed by fuzz_gemm, which --targets leaves out"]),
        Case("campaign --check-args", campaign + ["--check-args", "--time", "5"], 0,
             [r"arguments ok", r"build-targets: fuzz_transform"]),
        Case("campaign: a worker that stops at start-up fails the campaign",
             campaign + ["--build-dir", fake, "--targets", "fuzz_transform", "--jobs", "2", "--time", "1",
                         "--out", out], 3,
             [r"fuzz_transform worker 0 did not fuzz: stopped before fuzzing \(exit 2\): fuzz_transform: cannot start",
              r"fuzz_transform worker 1 did not fuzz", r"fuzz_transform .*NOT FUZZED: 2 of 2 worker\(s\)",
              r"NOT FUZZED: 2 worker\(s\) did not fuzz, named above \(exit 3\)"]),
        Case("campaign: a worker with zero executions fails the campaign",
             campaign + ["--build-dir", fake, "--targets", "fuzz_dispatch", "--jobs", "1", "--time", "1",
                         "--out", out], 3,
             [r"fuzz_dispatch worker 0 did not fuzz: zero executions \(exit 0\)", r"NOT FUZZED: 1 of 1 worker"]),
        Case("campaign: an unexpected error is a message and exit 2",
             campaign + ["--build-dir", fake, "--targets", "fuzz_reference", "--jobs", "1", "--time", "1",
                         "--out", out], 2, [r"campaign: error: IsADirectoryError: .*odd.txt"]),
    ]
    if not has_gpu:
        cases.append(Case("campaign fuzz_gemm without a GPU or --external",
                          campaign + ["--build-dir", fake, "--targets", "fuzz_gemm", "--out", out], 2,
                          [r"fuzz_gemm needs a GPU .* or --external LIB"]))

    # --- ./run: its arguments and its vectors are checked before anything is built.
    cases += [
        Case("./run --time 0 fails before building", run_job + ["--time", "0"], 2,
             [r"argument --time: must be at least 1"], [r"run: step 1 of 4"], timeout=120),
        Case("./run --targets , fails before building", run_job + ["--targets", ","], 2, [r"names no target"],
             [r"run: step 1 of 4"], timeout=120),
        Case("./run --build-dir is refused", run_job + ["--build-dir", "x"], 2, [r"--build-dir is chosen by ./run"],
             timeout=120),
        Case("./run without its vectors fails before building", run_job + ["--time", "1"], 2,
             [r"no V100 vectors: /nonexistent/vectors/v100_\*.csv matches nothing"], [r"run: step 1 of 4"],
             env={"MXDIFF_VECTORS_DIR": "/nonexistent/vectors"}, timeout=120),
    ]

    # --- the campaign fuzzing for real (libFuzzer build only).
    if opt.fuzzing:
        def corpus_listing():
            return {t: sorted(os.listdir(os.path.join(repo, "corpus", t))) for t in os.listdir(os.path.join(repo, "corpus"))
                    if os.path.isdir(os.path.join(repo, "corpus", t))}
        listing = {}
        # ELF magic and type (so the campaign's --external check lets it through), nothing loadable after.
        bad_library = write(os.path.join(tmp, "not-a-library.so"), b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x03\x00")
        cases += [
            Case("campaign fuzzes a CPU target and leaves corpus/ alone",
                 campaign + ["--build-dir", build, "--targets", "fuzz_dispatch", "--jobs", "1", "--time", "3",
                             "--out", out], 0, [r"fuzz_dispatch\s+1\s+\d+\s+[1-9]\d*\s.*\bok$", r"logs and inputs: "],
                 before=lambda: listing.update(corpus_listing()),
                 check=lambda output: None if corpus_listing() == listing else "corpus/ changed without --merge",
                 timeout=180),
            # --time 10: the worker must replay the seed corpus (ASan) before --time + 10 s on a
            # loaded machine, or the campaign rightly says it did not fuzz.
            Case("campaign --external fuzzes an external kernel without a GPU",
                 campaign + ["--build-dir", build, "--targets", "fuzz_gemm", "--external", opt.example_kernel,
                             "--jobs", "1", "--time", "10", "--out", out], 0,
                 # A worker in a large case 10 s past --time is stopped (tools/README.md) and still fuzzed.
                 [r"external kernel", r"fuzz_gemm\s+1\s+\d+\s+[1-9]\d*\s.*\bok( \(1 worker\(s\) stopped at the time limit\))?$"],
                 timeout=240),
            Case("campaign --external finds a kernel's wrong bit",
                 campaign + ["--build-dir", build, "--targets", "fuzz_gemm", "--external", opt.example_kernel,
                             "--jobs", "1", "--time", "3", "--out", out], 1,
                 [r"mismatch/ext-example-reference/", r"repro .*\.case --external=.*libmxdiff_example_kernel\.so"],
                 env={"MXDIFF_EXAMPLE_KERNEL_FLIP": "1"}, timeout=240),
            Case("campaign: a module that does not load fails the campaign",
                 campaign + ["--build-dir", build, "--targets", "fuzz_gemm", "--external", bad_library,
                             "--jobs", "1", "--time", "3", "--out", out], 3,
                 [r"fuzz_gemm worker 0 did not fuzz: stopped before fuzzing \(exit 2\): fuzz_gemm: .*not-a-library\.so",
                  r"NOT FUZZED: 1 of 1 worker"], timeout=240),
        ]
    # --- the GPU machine's scripts: bad usage is one line and exit 2, before anything runs.
    gpu_scripts = os.path.join(repo, "tools", "gpu")
    run_planted = os.path.join(gpu_scripts, "run_planted.sh")
    planted_baseline = os.path.join(tmp, "planted-baseline")
    os.makedirs(os.path.join(planted_baseline, "fuzz"))
    fake_fuzzer(os.path.join(planted_baseline, "fuzz", "fuzz_gemm"), "exit 0")
    gpu_session = os.path.join(repo, "python", "gpu", "gpu_session.sh")
    cases += [
        Case("run_planted.sh without arguments", [run_planted], 2, [r"usage: .*run_planted.sh FUZZ_BUILD_DIR"],
             check=one_line),
        Case("run_planted.sh on a missing build", [run_planted, os.path.join(tmp, "nowhere"), tmp], 2,
             [r"no .*nowhere/fuzz/fuzz_gemm"], check=one_line),
        Case("run_planted.sh on a file for the planted folder", [run_planted, planted_baseline, not_a_dir], 2,
             [r"is not a directory"], check=one_line),
        Case("build_planted.sh with a missing patch", [os.path.join(gpu_scripts, "build_planted.sh"),
                                                       os.path.join(tmp, "no.patch")], 2,
             [r"no.patch: no such patch"], check=one_line),
        Case("gpu_session.sh with seconds that are not a number", [gpu_session, "ten"], 2,
             [r"gpu_session: 'ten' is not a whole number"], check=one_line),
        Case("gpu_session.sh with a zero budget", [gpu_session, "30"], 2,
             [r"gpu_session: '0' is not a whole number"], check=one_line, env={"BUDGET": "0"}),
    ]
    return cases


def take_option(name, count):
    """Removes `name` and its `count` values from sys.argv, returns the values as absolute paths
    (contract_cases.main parses the rest)."""
    if name not in sys.argv:
        sys.exit(f"cli_contract_test.py: {name} is required")
    index = sys.argv.index(name)
    values = [os.path.abspath(v) for v in sys.argv[index + 1:index + 1 + count]]
    del sys.argv[index:index + 1 + count]
    return values


if __name__ == "__main__":
    # The hostile kernel (tests/tools/campaign/hostile_kernel.cc) and the three libraries that are not
    # kernels (not_a_kernel.cc: no entry, ABI 999, a null entry, a name with a space).
    HOSTILE_KERNEL, = take_option("--hostile-kernel", 1)
    NOT_A_KERNEL = take_option("--not-a-kernel", 4)

    def with_kernels(opt, tmp):
        opt.hostile_kernel, opt.not_a_kernel = HOSTILE_KERNEL, NOT_A_KERNEL
        return build_cases(opt, tmp)
    # On a hang, SIGTERM first: the campaign stops its workers on it.
    sys.exit(contract_cases.main(__doc__, "--test-kernel", with_kernels, "mxdiff-cli-", term_grace=10))
