#!/usr/bin/python3
"""bench_plot_test: tools/bench/plot_bench.py draws a PNG from a report in the bench's formats
(JSON and samples CSV, written here; and from the JSON alone, whose experiments hold their
samples), refuses a malformed CSV with exit 2, and says so with exit 3 where matplotlib is
missing. Skips (exit 77) where this Python has no matplotlib.

  plot_bench_test.py PLOT_SCRIPT WORK_DIR
"""
import json
import os
import subprocess
import sys

script, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
try:
    import matplotlib  # noqa: F401
except ImportError as missing:
    print(f"bench_plot_test: SKIPPED: no matplotlib for {sys.executable} ({missing})")
    sys.exit(77)
header = ("shape,protocol,schedule,round,slot,arm,arm_label,per_call_us,replay_us,calls,sm_mhz,memory_mhz,reasons,"
          "discarded\n")
rows, experiments = [], []
for protocol, schedule, shift in [("sound", "ABBA", -0.5), ("swapped", "BAAB", -0.4), ("a-a", "ABBA", 0.0),
                                  ("naive", "ABBA", -4.0)]:
    for r in range(20):
        for slot, arm in enumerate("ABBA" if schedule == "ABBA" else "BAAB"):
            us = 15.0 + (shift if arm == "B" else 0.0) + 0.01 * ((r * 7 + slot) % 5)
            rows.append(f'"W2, TP8",{protocol},{schedule},{r},{slot},{arm},{"ordinary" if arm == "A" else "folded"},'
                        f"{us:.6f},{us * 32:.3f},32,1980,3201,0x0,{1 if r == 4 else 0}\n")
    experiments.append({"protocol": protocol, "schedule": schedule,
                        "difference": {"relative": shift / 15, "relative_ci_low": shift / 15 - 0.001,
                                       "relative_ci_high": shift / 15 + 0.001}})
experiments.append({"protocol": "naive", "schedule": "ABBA", "error": "capture failed"})  # no difference
# The JSON's own samples (report.cc's columns), for the sound and naive protocols of another shape.
json_experiments = []
for protocol, a_us, shift in [("sound", 45.0, -1.3), ("naive", 90.0, -46.3)]:
    rows_json = [[r, slot, 0 if arm == "A" else 1, a_us + (shift if arm == "B" else 0.0) + 0.01 * slot, 1980, 0,
                  r == 3] for r in range(25) for slot, arm in enumerate("ABBA")]
    json_experiments.append({"protocol": protocol, "schedule": "ABBA",
                             "a": {"label": "ordinary"}, "b": {"label": "folded"},
                             "difference": {"relative": shift / a_us, "relative_ci_low": shift / a_us - 0.001,
                                            "relative_ci_high": shift / a_us + 0.001},
                             "samples": {"columns": ["round", "slot", "arm", "per_call_us", "sm_mhz", "reasons",
                                                     "discarded"], "rows": rows_json}})
report = {"device": "Fake", "seed": 1,
          "shapes": [{"name": "W2, TP8", "tactic": "8x128x64/s2/w0", "experiments": experiments,
                      "verdict": {"result": "faster", "message": "folded is faster"}},
                     {"name": "layer-tp4", "tactic": "8x128x64/s16/w0", "experiments": json_experiments,
                      "verdict": {"result": "faster", "message": "folded is faster"}}]}
paths = {name: os.path.join(work, name) for name in ("r.json", "r.csv", "r.png", "bad.csv", "j.png", "bad.json")}
with open(paths["r.json"], "w") as f:
    json.dump(report, f)
with open(paths["r.csv"], "w") as f:
    f.write(header + "".join(rows))
if os.path.exists(paths["r.png"]):
    os.remove(paths["r.png"])
done = subprocess.run([sys.executable, script, "--json", paths["r.json"], "--csv", paths["r.csv"],
                       "--out", paths["r.png"]], capture_output=True, text=True)
assert done.returncode == 0, done.stderr
with open(paths["r.png"], "rb") as f:
    png = f.read()
assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
assert len(png) > 20000, f"suspiciously small PNG: {len(png)} bytes"
with open(paths["bad.csv"], "w") as f:
    f.write("a,b\n1,2\n")
bad = subprocess.run([sys.executable, script, "--json", paths["r.json"], "--csv", paths["bad.csv"],
                      "--out", paths["r.png"]], capture_output=True, text=True)
assert bad.returncode == 2, (bad.returncode, bad.stderr)
assert "not a bench samples CSV" in bad.stderr, bad.stderr

# The JSON alone: the second shape's panels come from its experiments' samples.
if os.path.exists(paths["j.png"]):
    os.remove(paths["j.png"])
alone = subprocess.run([sys.executable, script, "--json", paths["r.json"], "--out", paths["j.png"]],
                       capture_output=True, text=True)
assert alone.returncode == 0, alone.stderr
with open(paths["j.png"], "rb") as f:
    png_alone = f.read()
assert png_alone[:8] == b"\x89PNG\r\n\x1a\n" and len(png_alone) > 20000, len(png_alone)
broken = dict(report)
broken["shapes"] = [dict(report["shapes"][1])]
broken["shapes"][0]["experiments"] = [dict(json_experiments[0], samples={"columns": ["x"], "rows": [[1]]})]
with open(paths["bad.json"], "w") as f:
    json.dump(broken, f)
bad_json = subprocess.run([sys.executable, script, "--json", paths["bad.json"], "--out", paths["j.png"]],
                          capture_output=True, text=True)
assert bad_json.returncode == 2 and "samples without" in bad_json.stderr, (bad_json.returncode, bad_json.stderr)

# Without matplotlib: one line and exit 3 (a package named matplotlib that cannot be imported).
fake = os.path.join(work, "no-matplotlib", "matplotlib")
os.makedirs(fake, exist_ok=True)
with open(os.path.join(fake, "__init__.py"), "w") as f:
    f.write("raise ImportError('blocked by the test')\n")
blocked = subprocess.run([sys.executable, script, "--json", paths["r.json"], "--out", paths["j.png"]],
                         capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.path.dirname(fake)))
assert blocked.returncode == 3, (blocked.returncode, blocked.stderr)
assert blocked.stderr.count("\n") == 1 and "no matplotlib here" in blocked.stderr, blocked.stderr
print("bench_plot_test: PNG of", len(png), "bytes, from the JSON alone", len(png_alone),
      "bytes; malformed CSV and JSON samples refused; no matplotlib: exit 3")
