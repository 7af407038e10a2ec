"""Python kernels for libmxdiff_python_kernel.so's tests and benchmark (python/README.md).

`reference` is the Python counterpart of the C ABI's example kernel
(fuzz/modules/example_external_kernel.cc): the C++ reference through the package, one thread, so
the two differ only by the way in (C ABI vs embedded Python): the benchmark measures that."""
import time

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
    while True:
        time.sleep(0)  # pure Python: the watchdog's TimeoutError lands here
