#!/usr/bin/env python3
"""`mxdiff gate` on generated V4-shaped checkpoints (the ctest fixture v4_checkpoints of
tests/checkpoint/: 2 layers x 8 experts, hidden 256, intermediate 128, clean and one defect each):

- clean, no GPU: INCONCLUSIVE exit 3, steps 1-3 passed (the CPU reference ran), 4-5 skipped
  "no CUDA device", report.json valid against tools/gate/report.schema.json, the figure or a note,
  report.json's "speed" empty and no bench.json (without a GPU nothing is timed);
- a planted raw 112 (layers.1, expert 3's w3) / a planted 0xFF (layers.0, expert 5's w2): the audit
  refuses that GEMM with the position, the report says the folded arm falls back on it;
- missing w3, a scale shape mismatch, a truncated shard, bad flags: exit 2 and one line naming the
  file, tensor or flag, and nothing that looks like a verdict in --report.
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

    def bad_input(self, name, checkpoint, flags, says):
        out = os.path.join(self.tmp, name)
        os.makedirs(out, exist_ok=True)  # an earlier gate's verdict there must not survive this one's failure
        for stale in ("report.json", "report.md"):
            with open(os.path.join(out, stale), "w") as file:
                file.write("MERGE (an earlier run)\n")
        run, _ = self.gate(name, checkpoint, *flags)
        lines = run.stderr.strip().splitlines()
        errors = [line for line in lines if not line.startswith("gate: ")]
        self.expect(f"{name}: exit 2", run.returncode == 2, f"exit {run.returncode}: {run.stderr[-1500:]}")
        self.expect(f"{name}: one line naming it", len(errors) == 1 and says in errors[0], errors)
        self.expect(f"{name}: nothing on stdout", run.stdout == "", run.stdout)
        left = os.listdir(out) if os.path.isdir(out) else []
        self.expect(f"{name}: no verdict in --report", not [f for f in left if f.startswith("report")], left)

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
        truncated = os.path.join(self.tmp, "truncated")
        shutil.copytree(ckpt("clean"), truncated)
        shard = os.path.join(truncated, "model-00001-of-00002.safetensors")
        os.truncate(shard, os.path.getsize(shard) // 2)
        self.bad_input("truncated shard", truncated, [], "model-00001-of-00002.safetensors")
        garbage = os.path.join(self.tmp, "garbage.safetensors")
        with open(garbage, "wb") as file:
            file.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
        self.bad_input("malformed shard", garbage, [], "garbage.safetensors")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mxdiff", required=True)
    parser.add_argument("--checkpoints", required=True)
    parser.add_argument("--schema", required=True)
    test = Test(parser.parse_args())
    test.clean()
    test.planted("raw112_rank0", "layers.0", "W13", "raw 112 at layers.0.ffn.experts.3.w3.scale [5, 2]",
                 "ordinary (falls back: this rank's slice refused: 1 scale byte outside")
    test.planted("raw112_rank3", "layers.0", "W13", "raw 112 at layers.0.ffn.experts.3.w3.scale [100, 2]",
                 "folded (the audit refused the whole tensor, but rank 0 of 4 holds none of its refused bytes")
    test.planted("nan_rank0", "layers.1", "W2", "raw 255 at layers.1.ffn.experts.5.w2.scale [7, 0]",
                 "ordinary (falls back: this rank's slice refused: 1 scale byte outside")
    test.bad_inputs()
    shutil.rmtree(test.tmp, ignore_errors=True)
    print(f"{len(test.failures)} failure(s)")
    return 1 if test.failures else 0


if __name__ == "__main__":
    sys.exit(main())
