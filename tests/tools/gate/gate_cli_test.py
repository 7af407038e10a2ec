#!/usr/bin/env python3
"""`mxdiff gate` on generated V4-shaped checkpoints (the ctest fixture v4_checkpoints of
tests/checkpoint/: 2 layers x 8 experts, hidden 256, intermediate 128, clean and one defect each):

- clean, no GPU: INCONCLUSIVE exit 3, steps 1-3 passed (the CPU reference ran), 4-5 skipped
  "no CUDA device", report.json valid against tools/gate/report.schema.json, the figure or a note,
  report.json's "speed" empty and no bench.json (without a GPU nothing is timed);
- a planted raw 112 (layers.1, expert 3's w3) / a planted 0xFF (layers.0, expert 5's w2): the audit
  refuses that GEMM with the position, the report says the folded arm falls back on it;
- missing w3, a scale shape mismatch, a truncated shard, bad flags (arms without folded, a layer
  twice): exit 2 and exactly one line naming the file, tensor or flag, the report folder untouched;
- --report=DIR: the user's own report.json/report.md/bench.json there are never replaced, an
  earlier gate's report is; a folder with a quote or shell syntax in its name is one folder;
- `mxdiff gate --help` (the gate's arms, seed, exit statuses), `mxdiff UNKNOWN` in one line.
On a machine with an NVIDIA driver the device steps run; there only steps 1-3 are checked.

  gate_cli_test.py --mxdiff BIN --checkpoints DIR --schema FILE
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HAS_GPU = os.path.exists("/proc/driver/nvidia/version")


def validate(value, schema, where="report.json"):
    """The JSON Schema keywords report.schema.json uses (type, const, enum, required, properties,
    additionalProperties, items); a list of problems."""
    problems = []
    types = {"object": dict, "array": list, "string": str, "integer": int, "number": (int, float), "boolean": bool}
    kind = schema.get("type")
    if kind and (not isinstance(value, types[kind]) or (kind in ("integer", "number") and isinstance(value, bool))):
        return [f"{where}: {value!r} is not {kind}"]
    if "const" in schema and value != schema["const"]:
        problems.append(f"{where}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} not in {schema['enum']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        problems += [f"{where}: no {key}" for key in schema.get("required", []) if key not in value]
        for key, item in value.items():
            sub = props.get(key, schema.get("additionalProperties", {}))
            if sub is False:
                problems.append(f"{where}: unexpected {key}")
            elif isinstance(sub, dict):
                problems += validate(item, sub, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems += validate(item, schema["items"], f"{where}[{i}]")
    return problems


class Test:
    def __init__(self, args):
        self.args, self.failures = args, []
        self.tmp = tempfile.mkdtemp(prefix="gate_cli_test.")
        with open(args.schema) as file:
            self.schema = json.load(file)

    def gate(self, name, checkpoint, *flags, report=True):
        out = os.path.join(self.tmp, name)
        argv = [self.args.mxdiff, "gate", checkpoint, "--tp=4", "--rank=0", "--cases=2", "--seed=5", "--budget_s=1", *flags]
        if report:
            argv.append(f"--report={out}")
        run = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        return run, out

    def expect(self, name, condition, detail):
        if not condition:
            self.failures.append(f"{name}: {detail}")
        print(f"{'ok  ' if condition else 'FAIL'} {name}: {detail if not condition else ''}".rstrip())

    def report(self, name, out):
        path = os.path.join(out, "report.json")
        if not os.path.exists(path):
            self.expect(name, False, "no report.json")
            return None
        with open(path) as file:
            report = json.load(file)
        problems = validate(report, self.schema)
        self.expect(f"{name}: report.json against the schema", not problems, "; ".join(problems))
        return report

    def steps(self, report):
        return {step["step"]: step for step in report["steps"]}

    def inconclusive_on_cpu(self, name, run, report):
        """Steps 1-3 passed; without a GPU, 4-5 skipped for want of a device and the verdict INCONCLUSIVE."""
        steps = self.steps(report)
        for step in ("audit", "proof", "real-weights"):
            self.expect(f"{name}: {step} passed", steps[step]["outcome"] == "passed", steps[step])
        self.expect(f"{name}: the CPU reference ran", "CPU reference MoE layer ran 3 cases" in steps["real-weights"]["summary"],
                    steps["real-weights"]["summary"])
        if HAS_GPU:
            self.expect(f"{name}: exactness passed on the device", steps["exactness"]["outcome"] == "passed",
                        steps["exactness"])
            return
        self.expect(f"{name}: exit 3", run.returncode == 3, f"exit {run.returncode}: {run.stderr[-2000:]}")
        self.expect(f"{name}: INCONCLUSIVE", report["verdict"] == "INCONCLUSIVE" and report["exit_status"] == 3,
                    report["verdict"])
        for step in ("exactness", "speed"):
            self.expect(f"{name}: {step} skipped, no device",
                        steps[step]["outcome"] == "skipped" and steps[step]["summary"].startswith("no CUDA device"),
                        steps[step])
        speed = report["speed"]  # without a GPU the speed step measured nothing and wrote nothing
        self.expect(f"{name}: no speed measurement, no bench.json, no per-token figure",
                    speed["measurements"] == [] and speed["bench_json"] == "" and "per_token" not in speed and
                    not os.path.exists(os.path.join(self.tmp, name, "bench.json")) and
                    "bench_rounds.png" not in report["figures"] and speed["naive_first_use"] == "tune", speed)
        self.expect(f"{name}: us per token not measured",
                    any(n.startswith("us per token: not measured") for n in report["notes"]), report["notes"])
        self.expect(f"{name}: a progress line per step on stderr",
                    all(f"gate: [{i}/5] " in run.stderr for i in range(1, 6)), run.stderr[-2000:])
        self.expect(f"{name}: GPU none", report["gpu"] == "" and "- GPU: none" in open(os.path.join(
            self.tmp, name, "report.md")).read(), report["gpu"])

    def clean(self):
        run, out = self.gate("clean", os.path.join(self.args.checkpoints, "clean"))
        report = self.report("clean", out)
        if report is None:
            return
        self.inconclusive_on_cpu("clean", run, report)
        steps = self.steps(report)
        self.expect("clean: the proof counted 208 patterns",
                    "raw 114..126: 13 bytes x 16 codes = 208 patterns, 208 equal" in steps["proof"]["summary"],
                    steps["proof"]["summary"])
        self.expect("clean: the slicing is said", any("W13 column-parallel, rows [0, 32) of w1 and of w3" in d
                                                      for d in steps["real-weights"]["details"]),
                    steps["real-weights"]["details"])
        figure = os.path.exists(os.path.join(out, "audit_histograms.png"))
        self.expect("clean: a figure or a note why not",
                    figure == ("audit_histograms.png" in report["figures"]) and
                    (figure or any(n.startswith("no figure: ") for n in report["notes"])), report["notes"])
        self.expect("clean: nothing partial left", not [f for f in os.listdir(out) if "partial" in f], os.listdir(out))
        configured = os.path.join(self.tmp, "configured")  # the model's top-k from config.json beside the checkpoint
        shutil.copytree(os.path.join(self.args.checkpoints, "clean"), configured)
        with open(os.path.join(configured, "config.json"), "w") as file:
            json.dump({"num_experts_per_tok": 2}, file)
        run, out = self.gate("top-k", configured)
        report = self.report("top-k", out)
        if report is not None:
            details = self.steps(report)["real-weights"]["details"]
            self.expect("config.json's top-k is used", "top-k 2 (config.json num_experts_per_tok = 2)" in details[0], details)
        run, out = self.gate("all", os.path.join(self.args.checkpoints, "clean"), "--layers=all")
        report = self.report("all", out)
        if report is not None:
            details = self.steps(report)["real-weights"]["details"]
            self.expect("--layers=all: both layers loaded and run",
                        len(details) == 2 and details[1].startswith("layers.1: "), details)

    def planted(self, name, layer, gemm, position, runs):
        run, out = self.gate(name, os.path.join(self.args.checkpoints, name), f"--layers={layer}")
        report = self.report(name, out)
        if report is None:
            return
        self.inconclusive_on_cpu(name, run, report)
        steps = self.steps(report)
        refused = [d for d in steps["audit"]["details"] if d.startswith(f"{layer}.ffn.experts.{gemm} refused")]
        self.expect(f"{name}: the audit refuses {layer} {gemm} at the planted byte",
                    len(refused) == 1 and position in refused[0], steps["audit"]["details"])
        self.expect(f"{name}: the report says what the folded arm runs on {gemm}: {runs}",
                    f"{gemm} {runs}" in steps["real-weights"]["details"][0], steps["real-weights"]["details"])
        if HAS_GPU:  # the folded arm's route on that GEMM, as the kernels took it
            want = "ordinary" if runs.startswith("ordinary") else "folded"
            self.expect(f"{name}: the device's folded arm ran {want} on {gemm}",
                        any(f"{layer} arm folded: " in d and f"{gemm} {want} " in d for d in steps["exactness"]["details"]),
                        steps["exactness"]["details"])
        self.expect(f"{name}: the proof names the differing byte only in refused GEMMs",
                    "only in refused GEMMs, where folded falls back" in steps["proof"]["summary"], steps["proof"]["summary"])

    def earlier_report(self, out):
        """DIR holding an earlier gate's report (the clean run's) and a file of the user's; their bytes."""
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(os.path.join(self.tmp, "clean"), out)
        with open(os.path.join(out, "notes.txt"), "w") as file:
            file.write("the user's own notes\n")
        return self.contents(out)

    def contents(self, out):
        found = {}
        for name in sorted(os.listdir(out)) if os.path.isdir(out) else []:
            path = os.path.join(out, name)
            if os.path.isfile(path):
                with open(path, "rb") as file:
                    found[name] = file.read()
        return found

    def bad_input(self, name, checkpoint, flags, says):
        """Exit 2, exactly one line on stderr (no seed or progress line before it), nothing on stdout,
        and the report folder as it was: nothing is removed before the gate has decided."""
        out = os.path.join(self.tmp, name)
        before = self.earlier_report(out)
        run, _ = self.gate(name, checkpoint, *flags)
        lines = run.stderr.splitlines()
        self.expect(f"{name}: exit 2", run.returncode == 2, f"exit {run.returncode}: {run.stderr[-1500:]}")
        self.expect(f"{name}: exactly one line naming it", len(lines) == 1 and says in lines[0], lines)
        self.expect(f"{name}: nothing on stdout", run.stdout == "", run.stdout)
        self.expect(f"{name}: the report folder as it was", self.contents(out) == before, sorted(self.contents(out)))

    def bad_inputs(self):
        ckpt = lambda name: os.path.join(self.args.checkpoints, name)
        self.bad_input("missing w3", ckpt("missing_w3"), [], 'tensor "layers.0.ffn.experts.2.w3.weight" is missing')
        self.bad_input("scale shape", ckpt("scale_shape"), [], 'tensor "layers.0.ffn.experts.1.w3.scale": F8_E8M0 [128, 7]')
        self.bad_input("layer not there", ckpt("clean"), ["--layers=layers.7"], "--layers: layers.7 is not an MoE layer")
        self.bad_input("tp not dividing", ckpt("clean"), ["--tp=3"], "tp=3 does not divide the intermediate size 128")
        self.bad_input("rank out of range", ckpt("clean"), ["--tp=4", "--rank=4"], "--rank=4 is out of range for --tp=4")
        self.bad_input("unknown arm", ckpt("clean"), ["--arms=ordinary,fast"], "--arms: unknown arm 'fast'")
        self.bad_input("speed time negative", ckpt("clean"), ["--speed_time=-1"], "--speed_time must be 0..86400")
        self.bad_input("no checkpoint", "--cases=2", [], "no checkpoint")
        self.bad_input("a layer twice", ckpt("clean"), ["--layers=layers.0,layers.0"], "--layers=layers.0,layers.0: "
                       "layers.0 is listed twice")
        for arms in ("ordinary", "ordinary,ordinary"):
            self.bad_input(f"arms {arms}", ckpt("clean"), [f"--arms={arms}"], "the gate judges the folded kernel")
        self.bad_input("arms folded,folded", ckpt("clean"), ["--arms=folded,folded"], "folded is listed twice")
        truncated = os.path.join(self.tmp, "truncated")
        shutil.copytree(ckpt("clean"), truncated)
        shard = os.path.join(truncated, "model-00001-of-00002.safetensors")
        os.truncate(shard, os.path.getsize(shard) // 2)
        self.bad_input("truncated shard", truncated, [], "model-00001-of-00002.safetensors")
        garbage = os.path.join(self.tmp, "garbage.safetensors")
        with open(garbage, "wb") as file:
            file.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
        self.bad_input("malformed shard", garbage, [], "garbage.safetensors")


    def report_folder(self):
        """The user's own report.json, report.md or bench.json in --report=DIR is never replaced: the
        gate refuses the folder before it runs (and at bad input leaves it alone). An earlier gate's
        report is replaced once the gate has decided, its bench.json and figures with it."""
        clean = os.path.join(self.args.checkpoints, "clean")
        for own in ("report.json", "report.md", "bench.json"):
            for flags, says in (([], f"{own} there was not written by mxdiff gate"), (["--tp=3"], "tp=3 does not divide")):
                name = f"user's {own} {' '.join(flags) or 'a run'}"
                out = os.path.join(self.tmp, name)
                os.makedirs(out)
                with open(os.path.join(out, own), "w") as file:
                    file.write('{"schema": "mine", "verdict": "MERGE"}\n' if own.endswith(".json") else "# my notes\n")
                before = self.contents(out)
                run, _ = self.gate(name, clean, *flags)
                lines = run.stderr.splitlines()
                if not flags:
                    self.expect(f"{name}: exit 2, one line naming the file", run.returncode == 2 and len(lines) == 1
                                and says in lines[0], run.stderr[-1500:])
                else:
                    self.expect(f"{name}: exit 2", run.returncode == 2, run.stderr[-1500:])
                self.expect(f"{name}: the user's file survives", self.contents(out) == before, sorted(self.contents(out)))
        out = os.path.join(self.tmp, "again")
        self.earlier_report(out)
        with open(os.path.join(out, "report.json")) as file:
            earlier = json.load(file)
        earlier["figures"].append("bench_rounds.png")  # as an earlier gate on a GPU leaves it
        earlier["reason"] = "the earlier gate's"
        with open(os.path.join(out, "report.json"), "w") as file:
            json.dump(earlier, file)
        with open(os.path.join(out, "bench_rounds.png"), "wb") as file:
            file.write(b"an earlier gate's figure")
        with open(os.path.join(out, "bench.json"), "w") as file:
            json.dump({"shapes": [], "written_by": "mxdiff-gate/1"}, file)
        run, _ = self.gate("again", clean)
        left = self.contents(out)
        report = json.loads(left.get("report.json", b"{}"))
        self.expect("again: the earlier report is replaced", run.returncode in (0, 1, 3) and
                    report.get("reason") not in (None, "the earlier gate's"), run.stderr[-1500:])
        self.expect("again: its bench.json and figure go, the user's notes stay",
                    "bench.json" not in left and "bench_rounds.png" not in left and "notes.txt" in left, sorted(left))

    def quoted_report_folder(self):
        """--report with a quote and with shell syntax in it: one folder, the figure drawn in it where
        matplotlib is there, and no command run."""
        cwd = os.path.join(self.tmp, "cwd")
        os.makedirs(cwd)
        has_matplotlib = subprocess.run(["/usr/bin/python3", "-c", "import matplotlib"],
                                        capture_output=True).returncode == 0
        for name in ("John's run", "it's';touch PWNED;'"):
            out = os.path.join(cwd, "x", name)
            argv = [os.path.abspath(self.args.mxdiff), "gate", os.path.abspath(os.path.join(self.args.checkpoints, "clean")), "--tp=4", "--cases=2",
                    "--seed=5", "--budget_s=1", f"--report={out}"]
            run = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=cwd)
            self.expect(f"report {name!r}: decided", run.returncode in (0, 1, 3), run.stderr[-1500:])
            figure = os.path.exists(os.path.join(out, "audit_histograms.png"))
            self.expect(f"report {name!r}: the figure in the folder" + ("" if has_matplotlib else " (no matplotlib)"),
                        figure or not has_matplotlib, sorted(os.listdir(out)) if os.path.isdir(out) else "no folder")
            planted = [os.path.join(d, f) for d, _, files in os.walk(self.tmp) for f in files if f == "PWNED"]
            self.expect(f"report {name!r}: no command ran", not planted, planted)

    def libraries(self):
        """--baseline_kernel / --candidate_kernel: two kernel libraries in place of the builtin pair. On the
        CPU the example and fake libraries run (the reference behind the ABI): a candidate that differs
        is DO-NOT-MERGE; a folded-only candidate on a GEMM this rank refuses is not called (the baseline
        is the fallback); bad input is exit 2 in one line."""
        ckpt = lambda name: os.path.join(self.args.checkpoints, name)
        example = self.args.example_kernel
        copy = os.path.join(self.tmp, "example-copy.so")
        shutil.copyfile(example, copy)
        pair = lambda base, cand: [f"--baseline_kernel={base}", f"--candidate_kernel={cand}"]

        run, out = self.gate("libraries flip", ckpt("clean"), *pair(example, self.args.fake_flip_folded))
        report = self.report("libraries flip", out)
        if report is not None:
            exactness = self.steps(report)["exactness"]
            self.expect("libraries flip: DO-NOT-MERGE, exit 1", run.returncode == 1 and report["verdict"] == "DO-NOT-MERGE",
                        f"exit {run.returncode}: {run.stderr[-1500:]}")
            self.expect("libraries flip: the candidate differs from the reference", exactness["outcome"] == "failed" and
                        "the candidate library (ext-gate-fake-flip-folded, folded" in exactness["summary"], exactness)
            self.expect("libraries flip: each step's command names both libraries",
                        all(example in s["command"] and self.args.fake_flip_folded in s["command"]
                            for s in report["steps"] if s["step"] in ("real-weights", "exactness")), report["steps"])

        run, out = self.gate("libraries fallback", ckpt("raw112_rank0"), *pair(example, self.args.fake_folded_only))
        report = self.report("libraries fallback", out)
        if report is not None:
            exactness = self.steps(report)["exactness"]
            self.expect("libraries fallback: exactness passed (W13 refused on rank 0 ran on the baseline only)",
                        exactness["outcome"] == "passed" and any(
                            d.startswith("layers.0 W13: baseline") and "the candidate falls back to the baseline" in d
                            for d in exactness["details"]) and any(
                            d.startswith("layers.0 W2: baseline") and "candidate ext-gate-fake-folded-only folded" in d
                            for d in exactness["details"]), exactness)
            if not HAS_GPU:
                self.expect("libraries fallback: INCONCLUSIVE without a GPU (speed not decided), exit 3",
                            run.returncode == 3 and self.steps(report)["speed"]["outcome"] in ("skipped", "no-verdict"),
                            f"exit {run.returncode}: {run.stderr[-1500:]}")

        run, out = self.gate("libraries copy", ckpt("clean"), *pair(example, copy))
        report = self.report("libraries copy", out)
        if report is not None:
            self.expect("libraries copy: exactness passed", self.steps(report)["exactness"]["outcome"] == "passed",
                        self.steps(report)["exactness"])

        not_a_library = os.path.join(self.tmp, "not-a-library.so")
        with open(not_a_library, "w") as file:
            file.write("not an ELF file\n")
        link = os.path.join(self.tmp, "example-link.so")
        os.symlink(os.path.abspath(example), link)
        self.bad_input("libraries: one alone", ckpt("clean"), [f"--baseline_kernel={example}"],
                       "--baseline_kernel and --candidate_kernel go together")
        self.bad_input("libraries: missing", ckpt("clean"), pair(example, "/nonexistent/lib.so"),
                       "--candidate_kernel=/nonexistent/lib.so: no such file")
        self.bad_input("libraries: a folder", ckpt("clean"), pair(self.tmp, example),
                       f"--baseline_kernel={self.tmp}: not a regular file")
        self.bad_input("libraries: not loadable", ckpt("clean"), pair(example, not_a_library),
                       f"--candidate_kernel={not_a_library}: cannot load external kernel")
        self.bad_input("libraries: the same file twice", ckpt("clean"), pair(example, link),
                       "--baseline_kernel and --candidate_kernel are the same file")
        self.bad_input("libraries: ABI v1 beside v2", ckpt("clean"), pair(self.args.fake_v1, example),
                       "speaks kernel ABI v1")
        self.bad_input("libraries: unknown step model", ckpt("clean"), [*pair(example, copy), "--ext_model=fast"],
                       "unknown --ext_model 'fast'")

    def usage(self):
        """`mxdiff gate --help` lists the gate's own arms, seed and exit statuses; `mxdiff UNKNOWN` is one line."""
        run = subprocess.run([self.args.mxdiff, "gate", "--help"], capture_output=True, text=True, timeout=60)
        text = run.stdout
        self.expect("gate --help: exit 0", run.returncode == 0, run.stderr)
        self.expect("gate --help: the exit statuses 0/1/2/3",
                    all(s in text for s in ("0 MERGE", "1 DO-NOT-MERGE", "2 bad input", "3 INCONCLUSIVE")), text)
        self.expect("gate --help: no bench arms, no calibrate seed",
                    "ext:" not in text and "calibrate" not in text and "folded must be one of them" in text, text)
        run = subprocess.run([self.args.mxdiff, "frobnicate"], capture_output=True, text=True, timeout=60)
        self.expect("mxdiff UNKNOWN: exit 2 and one line", run.returncode == 2 and len(run.stderr.splitlines()) == 1 and
                    "unknown command 'frobnicate'" in run.stderr, run.stderr)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mxdiff", required=True)
    parser.add_argument("--checkpoints", required=True)
    parser.add_argument("--schema", required=True)
    parser.add_argument("--example-kernel", required=True)
    parser.add_argument("--fake-v1", required=True)
    parser.add_argument("--fake-folded-only", required=True)
    parser.add_argument("--fake-flip-folded", required=True)
    test = Test(parser.parse_args())
    test.clean()
    test.planted("raw112_rank0", "layers.0", "W13", "raw 112 at layers.0.ffn.experts.3.w3.scale [5, 2]",
                 "ordinary (falls back: this rank's slice refused: 1 scale byte outside")
    test.planted("raw112_rank3", "layers.0", "W13", "raw 112 at layers.0.ffn.experts.3.w3.scale [100, 2]",
                 "folded (the audit refused the whole tensor, but rank 0 of 4 holds none of its refused bytes")
    test.planted("nan_rank0", "layers.1", "W2", "raw 255 at layers.1.ffn.experts.5.w2.scale [7, 0]",
                 "ordinary (falls back: this rank's slice refused: 1 scale byte outside")
    test.bad_inputs()
    test.libraries()
    test.report_folder()
    test.quoted_report_folder()
    test.usage()
    shutil.rmtree(test.tmp, ignore_errors=True)
    print(f"{len(test.failures)} failure(s)")
    return 1 if test.failures else 0


if __name__ == "__main__":
    sys.exit(main())
