#!/usr/bin/python3
"""bench_plot_test: tools/bench/plot_bench.py draws a PNG from a report in the bench's formats
(JSON and samples CSV, written here), and refuses a malformed CSV with exit 2.

  plot_bench_test.py PLOT_SCRIPT WORK_DIR
"""
import json
import os
import subprocess
import sys

script, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
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
report = {"device": "Fake", "seed": 1,
          "shapes": [{"name": "W2, TP8", "tactic": "8x128x64/s2/w0", "experiments": experiments,
                      "verdict": {"result": "faster", "message": "folded is faster"}}]}
paths = {name: os.path.join(work, name) for name in ("r.json", "r.csv", "r.png", "bad.csv")}
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
print("bench_plot_test: PNG of", len(png), "bytes; malformed CSV refused")
