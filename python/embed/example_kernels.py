"""Python kernels for libmxdiff_python_kernel.so's tests and benchmark (python/README.md).

`reference` is the Python counterpart of the C ABI's example kernel
(fuzz/modules/example_external_kernel.cc): the C++ reference through the package, one thread, so
the two differ only by the way in (C ABI vs embedded Python): the benchmark measures that."""
import ctypes
import itertools
import sys

import numpy as np

import mxdiff


def reference(a, codes, scales, row_offsets, transform, model, cta_k, splits):
    return mxdiff.reference_gemm(a, codes, scales, row_offsets, codes.shape[1], a.shape[1], transform=transform,
                                 model=model, tactic=(cta_k, splits), threads=1)


def wrong_scale(a, codes, scales, row_offsets, transform, model, cta_k, splits):
    return reference(a, codes, np.minimum(scales.astype(np.int32) + 1, 254).astype(np.uint8), row_offsets,
                     transform, model, cta_k, splits)


def raises(a, codes, scales, row_offsets):
    raise RuntimeError("this kernel always fails")


def wrong_shape(a, codes, scales, row_offsets):
    return np.zeros((a.shape[0], codes.shape[1] + 1), np.float16)


def hangs(a, codes, scales, row_offsets):
    while True:  # pure Python that never lets go of the GIL by itself
        pass


def hangs_in_numpy(a, codes, scales, row_offsets):
    total = np.zeros(a.shape[1], np.float32)
    while True:
        total += a[0].astype(np.float32)


def hangs_in_native_code(a, codes, scales, row_offsets):
    return sum(itertools.repeat(0))  # one C call that holds the GIL and never checks for exceptions


def exits(a, codes, scales, row_offsets):
    sys.exit(0)


def flushes_in_place(a, codes, scales, row_offsets, transform, model, cta_k, splits):
    """Flushes subnormal activations in its input (through a raw pointer: no flag stops it), then
    computes correctly on what it wrote: only a reference that never reads the kernel's buffers
    finds it."""
    flushed = np.where(np.abs(a.astype(np.float32)) < 2.0 ** -14, np.float16(0), a)
    ctypes.memmove(a.ctypes.data, flushed.ctypes.data, a.nbytes)
    return reference(a, codes, scales, row_offsets, transform, model, cta_k, splits)


def _mx_spec_weights(codes, scales, flush_below=None):
    """e2m1 x 2^(raw - 127) in float64 (the OCP MX spec; a 0xFF block NaN), from NumPy alone."""
    c = mxdiff.unpack_codes(codes)
    magnitude = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])[c & 7]
    raw = np.repeat(scales, 32, axis=-1).astype(np.int64)
    w = np.where(c & 8, -magnitude, magnitude) * np.ldexp(1.0, raw - 127)
    if flush_below is not None:
        w = np.where(raw < flush_below, 0.0, w)
    return np.where(raw == 255, np.nan, w)


def mx_spec(a, codes, scales, row_offsets, flush_below=None):
    """A kernel that follows the MX spec: float64 weights, products and sums, one fp16 rounding
    (MXDIFF_PYTHON_TRANSFORM=mx-spec judges it)."""
    out = np.zeros((a.shape[0], codes.shape[1]), np.float16)
    with np.errstate(all="ignore"):
        for g in range(len(row_offsets) - 1):
            r0, r1 = int(row_offsets[g]), int(row_offsets[g + 1])
            if r0 < r1:
                w = _mx_spec_weights(codes[g], scales[g], flush_below)
                out[r0:r1] = (a[r0:r1].astype(np.float64)[:, None, :] * w[None]).sum(-1).astype(np.float16)
    return out


def mx_spec_flushed(a, codes, scales, row_offsets):
    """mx_spec with the SM70 contract's flush (raw <= 112 to zero): a departure from the spec."""
    return mx_spec(a, codes, scales, row_offsets, flush_below=113)
