#!/usr/bin/python3
"""Draws `mxdiff bench`'s results as one PNG: per shape, the per-round timings of both arms under
the sound protocol and under the naive one (when it ran), and B - A with its 95% interval for
every measurement (sound, swapped, A/A, naive). Reads the report's JSON (--json) and its raw
samples CSV (--csv); without --csv, the samples the JSON holds itself (every timed replay, in
each experiment's "samples"). matplotlib from Debian (python3-matplotlib), run with
/usr/bin/python3.

  /usr/bin/python3 tools/bench/plot_bench.py --json bench.json [--csv bench.csv] --out bench.png

Exit status: 0 written, 2 bad input (a missing or malformed file), 3 no matplotlib here (draw
where it is: the JSON holds everything).
"""
import argparse
import collections
import csv
import json
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: E402
except ImportError as missing:
    print(f"plot_bench: no matplotlib here ({missing}): install python3-matplotlib or plot elsewhere",
          file=sys.stderr)
    sys.exit(3)

PROTOCOLS = ["sound", "swapped", "a-a", "naive"]
COLORS = {"A": "tab:blue", "B": "tab:orange"}


def samples_from_json(report):
    """The same rows as the CSV's (the columns the plot reads), from each experiment's samples."""
    samples = collections.defaultdict(list)
    for shape in report["shapes"]:
        for e in shape.get("experiments", []):
            block = e.get("samples") or {"columns": [], "rows": []}
            columns = block["columns"]
            if block["rows"] and not {"round", "arm", "per_call_us", "discarded"} <= set(columns):
                raise ValueError(f'shape {shape["name"]}: samples without round/arm/per_call_us/discarded')
            for values in block["rows"]:
                row = dict(zip(columns, values))
                arm = "A" if int(row["arm"]) == 0 else "B"
                samples[(shape["name"], e["protocol"])].append({
                    "round": str(row["round"]), "arm": arm, "per_call_us": str(row["per_call_us"]),
                    "discarded": "1" if row["discarded"] else "0",
                    "arm_label": e.get("a" if arm == "A" else "b", {}).get("label", arm)})
    return samples


def load(json_path, csv_path):
    with open(json_path) as f:
        report = json.load(f)
    if csv_path is None:
        return report, samples_from_json(report)
    samples = collections.defaultdict(list)  # (shape, protocol) -> rows
    with open(csv_path, newline="") as f:
        reader = csv.DictReader(f)
        needed = {"shape", "protocol", "round", "arm", "arm_label", "per_call_us", "discarded"}
        if not reader.fieldnames or not needed <= set(reader.fieldnames):
            raise ValueError(f"{csv_path}: not a bench samples CSV (columns {reader.fieldnames})")
        for row in reader:
            samples[(row["shape"], row["protocol"])].append(row)
    return report, samples


def timings(ax, rows, title):
    if not rows:
        ax.set_visible(False)
        return
    for arm in ("A", "B"):
        kept = [r for r in rows if r["arm"] == arm and r["discarded"] == "0"]
        dropped = [r for r in rows if r["arm"] == arm and r["discarded"] != "0"]
        label = next((r["arm_label"] for r in rows if r["arm"] == arm), arm)
        ax.plot([int(r["round"]) for r in kept], [float(r["per_call_us"]) for r in kept], ".", ms=2.5,
                color=COLORS[arm], alpha=0.6, label=f"{arm}: {label}")
        if dropped:
            ax.plot([int(r["round"]) for r in dropped], [float(r["per_call_us"]) for r in dropped], "x", ms=4,
                    color=COLORS[arm], label=f"{arm} throttled (left out)")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("round")
    ax.set_ylabel("us per call")
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(alpha=0.3)


def differences(ax, shape):
    names, estimates, lows, highs = [], [], [], []
    for e in shape["experiments"]:
        d = e.get("difference")
        if not d:
            continue
        names.append(f'{e["protocol"]}\n{e["schedule"]}')
        estimates.append(100 * d["relative"])
        lows.append(100 * (d["relative"] - d["relative_ci_low"]))
        highs.append(100 * (d["relative_ci_high"] - d["relative"]))
    if not names:
        ax.text(0.5, 0.5, "no measurement", ha="center", va="center", transform=ax.transAxes)
        return
    y = list(range(len(names)))
    colors = ["tab:gray" if n.startswith("naive") else "tab:green" for n in names]
    for yi, est, low, high, color in zip(y, estimates, lows, highs, colors):
        ax.errorbar([est], [yi], xerr=[[low], [high]], fmt="none", ecolor=color, capsize=4)
    ax.scatter(estimates, y, c=colors, zorder=3)
    for yi, est in zip(y, estimates):
        ax.annotate(f"{est:+.2f}%", (est, yi), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=7)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(y)
    ax.set_yticklabels(names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("B - A, % of A's median (95% CI)")
    ax.set_title(f'verdict: {shape["verdict"]["result"]}', fontsize=9)
    ax.grid(alpha=0.3, axis="x")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", required=True)
    parser.add_argument("--csv", help="the samples CSV; default: the samples in the JSON")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    try:
        report, samples = load(args.json, args.csv)
        shapes = report["shapes"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"plot_bench: {error}", file=sys.stderr)
        return 2
    if not shapes:
        print(f"plot_bench: {args.json} holds no shapes", file=sys.stderr)
        return 2
    fig, axes = plt.subplots(len(shapes), 3, figsize=(16, 3.6 * len(shapes)), squeeze=False,
                             gridspec_kw={"width_ratios": [1.3, 1.3, 1]})
    for row, shape in zip(axes, shapes):
        name = shape["name"]
        title = f'{name}: {shape.get("tactic", "")}'
        timings(row[0], samples.get((name, "sound"), []), f"{title}, sound (ABBA)")
        naive = samples.get((name, "naive"), [])
        if naive:
            timings(row[1], naive, f"{title}, naive (the seed's protocol)")
        else:
            timings(row[1], samples.get((name, "swapped"), []), f"{title}, swapped (BAAB)")
        differences(row[2], shape)
    fig.suptitle(f'mxdiff bench on {report.get("device", "?")}, seed {report.get("seed", "?")}', fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"plot_bench: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
