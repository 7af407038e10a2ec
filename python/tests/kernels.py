"""NumPy kernels written for the tests: one that follows the sm90-emulated model bit for bit,
one that accumulates in float64, and the planted defects each can carry."""
import numpy as np

import mxdiff


def _weights(codes, scales, defect):
    table = mxdiff.transform_table("ordinary").astype(np.float32)  # [raw, code]
    c = mxdiff.unpack_codes(codes)
    raw = np.repeat(scales, 32, axis=-1).astype(np.int64)
    if defect == "scale-exponent":  # one too many: every weight doubled
        raw = np.minimum(raw + 1, 255)
    w = table[raw, c]
    if defect == "nan-0xff":  # the MX spec's NaN block where the kernels' contract has 2^15
        w = np.where(raw == 255, np.float32(np.nan), w)
    if defect == "dropped-block" and w.shape[-1] >= 64:
        w[..., -32:] = 0.0  # the last K block never loaded
    return w


def _activations(a, defect):
    with np.errstate(all="ignore"):
        a = np.asarray(a).astype(np.float32)
    if defect == "flushed-subnormal":
        a = np.where(np.abs(a) < 2.0 ** -14, np.float32(0), a)
    return a


def sm90_kernel(a, codes, scales, row_offsets, defect=None):
    """c + fma(a3,b3, fma(a2,b2, fma(a1,b1, fma(a0,b0,+0)))) per 4 k, one split, in float32
    (an fp16 x fp16 product is exact in float32, so a float32 add of it is the fma)."""
    w = _weights(codes, scales, defect)
    a32 = _activations(a, defect)
    rows, k = a32.shape
    out = np.zeros((rows, codes.shape[1]), np.float16)
    for g in range(len(row_offsets) - 1):
        r0, r1 = int(row_offsets[g]), int(row_offsets[g + 1])
        if r0 == r1:
            continue
        A, W = a32[r0:r1], w[g]
        acc = np.zeros((r1 - r0, W.shape[0]), np.float32)
        with np.errstate(all="ignore"):
            for s in range(0, k, 4):
                t = np.zeros_like(acc)
                for j in range(4):
                    t = (A[:, s + j, None] * W[None, :, s + j]) + t
                acc = acc + t
            out[r0:r1] = acc.astype(np.float16)
    bits = out.view(np.uint16)
    bits[np.isnan(out)] = 0x7FFF  # the canonical NaN the kernels write
    return out


def float64_kernel(a, codes, scales, row_offsets, defect=None):
    """Products and sums in float64, one rounding to fp16: a correct kernel of unknown order."""
    w = _weights(codes, scales, defect).astype(np.float64)
    with np.errstate(all="ignore"):
        a64 = _activations(a, defect).astype(np.float64)
    out = np.zeros((a64.shape[0], codes.shape[1]), np.float16)
    with np.errstate(all="ignore"):
        for g in range(len(row_offsets) - 1):
            r0, r1 = int(row_offsets[g]), int(row_offsets[g + 1])
            if r0 < r1:
                out[r0:r1] = (a64[r0:r1, None, :] * w[g][None, :, :]).sum(-1).astype(np.float16)
    return out


def spec_weights(codes, scales, dtype=np.float64, flush_below=None):
    """The OCP MX spec's weights, e2m1 x 2^(raw - 127), a 0xFF block NaN, computed here with
    np.ldexp (not mxdiff's table): in float64 exact, in float32 those past its range are Inf.
    flush_below=113: the SM70 contract's flush of raw <= 112 to zero, a departure from the spec."""
    c = mxdiff.unpack_codes(codes)
    magnitude = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float64)[c & 7]
    raw = np.repeat(scales, 32, axis=-1).astype(np.int64)
    with np.errstate(all="ignore"):
        w = np.where(c & 8, -magnitude, magnitude) * np.ldexp(1.0, raw - 127)
        w = np.where(raw == 255, np.nan, w)
        if flush_below is not None:
            w = np.where(raw < flush_below, 0.0, w)
        return w.astype(dtype)


def mx_spec_kernel(a, codes, scales, row_offsets, dtype=np.float64, flush_below=None):
    """A kernel that follows the MX spec: weights as spec_weights, products and sums in `dtype`
    (float32: an fp32 kernel, whose weights at raw 254 and |e2m1| >= 2 overflow to Inf), one
    rounding to fp16."""
    w = spec_weights(codes, scales, dtype, flush_below)
    with np.errstate(all="ignore"):
        a_wide = np.asarray(a).astype(dtype)
    out = np.zeros((a_wide.shape[0], codes.shape[1]), np.float16)
    with np.errstate(all="ignore"):
        for g in range(len(row_offsets) - 1):
            r0, r1 = int(row_offsets[g]), int(row_offsets[g + 1])
            if r0 < r1:
                out[r0:r1] = (a_wide[r0:r1, None, :] * w[g][None, :, :]).sum(-1, dtype=dtype).astype(np.float16)
    return out
