#!/usr/bin/env python3
"""Draws `mxdiff gate`'s figure: the audit's scale-byte histogram of each chosen GEMM (one panel
each, raw E8M0 byte against count, log scale; bytes outside the admitted set in red).

  plot_gate.py --json HISTOGRAMS.json --out audit_histograms.png

HISTOGRAMS.json: [{"layer": NAME, "admitted": BOOL, "histogram": {"RAW": COUNT, ...}}, ...],
written by the gate. Needs matplotlib (Debian python3-matplotlib); exits 1 with one line without it.
"""
import argparse
import json
import sys

ADMITTED = range(113, 129)  # reference/admission.h's rule today; the colour only, not a verdict


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        print(f"matplotlib is not installed ({error})", file=sys.stderr)
        return 1
    with open(args.json) as file:
        layers = json.load(file)
    figure, axes = plt.subplots(len(layers), 1, figsize=(8, 2.4 * len(layers)), squeeze=False)
    for axis, layer in zip(axes[:, 0], layers):
        raws = sorted(int(raw) for raw in layer["histogram"])
        counts = [layer["histogram"][str(raw)] for raw in raws]
        colours = ["tab:blue" if raw in ADMITTED else "tab:red" for raw in raws]
        axis.bar(raws, counts, color=colours)
        axis.set_yscale("log")
        axis.set_ylim(bottom=0.5)
        axis.set_title(f"{layer['layer']}: {'admitted' if layer['admitted'] else 'refused'}", fontsize=9)
        axis.set_xlabel("raw E8M0 scale byte")
        axis.set_ylabel("count")
    figure.tight_layout()
    figure.savefig(args.out + ".partial.png", dpi=100)
    import os
    os.replace(args.out + ".partial.png", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
