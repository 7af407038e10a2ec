"""Fuzzes one GPU kernel of gpu_kernels.py in mxdiff's bound mode for a number of seconds, then
probes what it does with the inputs the issue names (0xFF scales, raw 0 and 254, subnormal
activations, NaN); prints executions per second and every finding (python/gpu/README.md).

    python3 python/gpu/fuzz_gpu.py --kernel triton|torch --seconds 300 [--findings DIR]"""
import argparse
import collections
import os
import sys
import time

import numpy as np

import mxdiff

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# Decode-like shapes (n, k, rows per group): a few experts, some empty, up to the real K.
SHAPES = ((64, 256, (3,)), (128, 512, (2, 0, 1)), (256, 1024, (4, 2)), (512, 2048, (1, 0, 0, 5)),
          (32, 96, (6,)), (1024, 4096, (2, 1)), (64, 160, (1, 1, 1, 1)), (128, 7168 // 2, (3,)))


def cpu_float64(a, codes, scales, row_offsets, transform="ordinary"):
    """The contract's weights (mxdiff.transform_table, or mx_spec_table under mx-spec), float64
    sums, one rounding."""
    table = mxdiff.mx_spec_table() if transform == mxdiff.MX_SPEC else mxdiff.transform_table(transform)
    w = table.astype(np.float64)[np.repeat(scales, 32, axis=-1), mxdiff.unpack_codes(codes)]
    out = np.zeros((a.shape[0], codes.shape[1]), np.float16)
    with np.errstate(all="ignore"):
        for g in range(len(row_offsets) - 1):
            r0, r1 = int(row_offsets[g]), int(row_offsets[g + 1])
            if r0 < r1:
                out[r0:r1] = (a[r0:r1].astype(np.float64)[:, None, :] * w[g][None]).sum(-1).astype(np.float16)
    return out


def spec_reference(case):
    """The MX spec's value of each output in float64 (mxdiff.mx_spec_table), rounded once to fp16."""
    w = mxdiff.mx_spec_table()[np.repeat(case.scales, 32, axis=-1), mxdiff.unpack_codes(case.codes)]
    out = np.zeros((case.rows, case.n), np.float16)
    with np.errstate(all="ignore"):
        for g in range(case.groups):
            r0, r1 = int(case.row_offsets[g]), int(case.row_offsets[g + 1])
            out[r0:r1] = (case.activations[r0:r1].astype(np.float64)[:, None, :] * w[g][None]).sum(-1)
    return out


def probe_cases():
    """One case per behaviour the issue asks about, each on top of normal tensors."""
    out = []
    for index, (label, scale, activation) in enumerate((("scale 0xFF", 255, None), ("scale raw 0", 0, None),
                                     ("scale raw 254", 254, None), ("scale raw 112", 112, None),
                                     ("subnormal activations", None, "subnormal"), ("NaN activation", None, "nan"))):
        case = mxdiff.generate_case(1000 + index, 64, 128, [4], activations="normal", codes="normal",
                                    scales="normal")
        case._data.drop_recipes()
        if scale is not None:
            case.scales[0, :, 1] = scale  # the second K block of every column
        if activation == "subnormal":
            case.activations[...] = np.float16(2.0 ** -20)
        if activation == "nan":
            case.activations[1, 5] = np.float16("nan")
        out.append((label, case))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernel", required=True, choices=("triton", "torch", "cpu-float64"),
                        help="cpu-float64: a float64 NumPy kernel, to try this script without a GPU")
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--findings", default="gpu-findings")
    parser.add_argument("--transform", default="ordinary", choices=mxdiff.CHECK_TRANSFORMS,
                        help="the contract: ordinary (default) or folded, the SM70 kernels' transforms; mx-spec, the "
                             "OCP MX spec's element values")
    parser.add_argument("--show", type=int, default=3, help="findings printed in full per kind and shape")
    args = parser.parse_args()
    if args.kernel == "cpu-float64":
        def kernel(*inputs):
            return cpu_float64(*inputs, transform=args.transform)

        def synced(*inputs):
            return kernel(*inputs)
    else:
        from gpu_kernels import KERNELS
        import torch

        kernel = KERNELS[args.kernel]

        def synced(*inputs):
            out = kernel(*inputs)
            torch.cuda.synchronize()
            return out

    out_dir = os.path.join(args.findings, args.kernel)
    os.makedirs(out_dir, exist_ok=True)
    # Warm-up: the first call compiles.
    warm = mxdiff.generate_case(0, 64, 256, [2])
    synced(warm.activations, warm.codes, warm.scales, warm.row_offsets)

    start, executions, seed = time.monotonic(), 0, 0
    findings = []
    kernel_seconds = 0.0
    while time.monotonic() - start < args.seconds:
        n, k, rows = SHAPES[seed % len(SHAPES)]
        case = mxdiff.generate_case(seed, n, k, rows)
        seed += 1
        t0 = time.monotonic()
        findings += mxdiff.check(synced, [case], mode="bound", transform=args.transform, out_dir=out_dir,
                                 explain=True)
        kernel_seconds += time.monotonic() - t0
        executions += 1
    elapsed = time.monotonic() - start
    print(f"{args.kernel}: {executions} cases in {elapsed:.1f} s: {executions / elapsed:.2f} executions/s "
          f"(bound mode, transform {args.transform}, CPU-side checks included); {len(findings)} findings")
    by_kind = collections.defaultdict(list)
    for f in findings:
        by_kind[f.kind].append(f)
    for kind, group in sorted(by_kind.items()):
        print(f"\n== {kind}: {len(group)} cases")
        for f in group[:args.show]:
            print(str(f))
            print("  case: " + f.case.describe().replace("\n", "\n    "))
    print(f"\n{args.kernel}: probes (bound mode, transform {args.transform}):")
    reference_name = "the spec's value" if args.transform == mxdiff.MX_SPEC else "exact-model reference"
    for label, case in probe_cases():
        result = mxdiff.check(synced, [case], mode="bound", transform=args.transform, out_dir=out_dir)
        got = kernel(case.activations, case.codes, case.scales, case.row_offsets)
        got = got if isinstance(got, np.ndarray) else got.cpu().numpy()
        ref = spec_reference(case) if args.transform == mxdiff.MX_SPEC else case.reference(
            transform=args.transform, model="exact")
        verdict = "within the bound" if not result else str(result[0])
        print(f"- {label}: output[0, :4] {got[0, :4].tolist()} vs {reference_name} {ref[0, :4].tolist()}; "
              f"NaN outputs {int(np.isnan(got).sum())}, Inf {int(np.isinf(got).sum())}: {verdict}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
