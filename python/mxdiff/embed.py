"""The Python side of python/embed/ (libmxdiff_python_kernel.so): fuzz_gemm and repro load that
library as an external kernel (fuzz/modules/mxdiff_kernel_abi.h); it calls `run_case` here for
every case with NumPy views of the host memory (no copies).

Environment: MXDIFF_PYTHON=module:function (the kernel; it also gets the case's transform, model,
cta_k and splits as keyword arguments where its signature names them), MXDIFF_PYTHON_MODE=bits|bound (bits),
MXDIFF_PYTHON_DEVICE=cpu|cuda (cuda: torch tensors on the GPU), MXDIFF_PYTHON_REPORTS=DIR
(full reports of raised / shape / timeout / bound findings, traceback included; default
$MXDIFF_FINDINGS_DIR or the working folder).

Returns (0, fp16 bits as a [rows, n] uint16 array) or (2, message). In bound mode an output within
the bound returns the reference's bits for the case's own arithmetic, so fuzz_gemm's bit check
passes; one outside is a failure whose message starts with python/bound or python/specials."""
import hashlib
import importlib
import inspect
import os
import time
import traceback

import numpy as np

_kernel = None
_settings = ()  # the keyword arguments of (transform, model, cta_k, splits) the kernel takes
_stats = {"calls": 0, "seconds": 0.0}
_MODELS = ("v100", "sm90-emulated", "sm90-emulated-ftz", "exact")
_TRANSFORMS = ("ordinary", "folded")


def _load():
    global _kernel, _settings
    if _kernel is None:
        spec = os.environ.get("MXDIFF_PYTHON", "")
        module, _, function = spec.partition(":")
        if not module or not function:
            raise ValueError(f"MXDIFF_PYTHON must be module:function, not {spec!r}")
        _kernel = getattr(importlib.import_module(module), function)
        try:
            parameters = inspect.signature(_kernel).parameters
        except (TypeError, ValueError):
            parameters = {}
        _settings = tuple(name for name in ("transform", "model", "cta_k", "splits") if name in parameters)
    return _kernel


def _report(kind, text):
    folder = os.environ.get("MXDIFF_PYTHON_REPORTS") or os.environ.get("MXDIFF_FINDINGS_DIR") or "."
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{kind.replace('/', '.')}.{hashlib.sha1(text.encode()).hexdigest()[:12]}.txt")
    with open(path, "w") as f:
        f.write(text)
    return path


def _fail(kind, summary, detail=""):
    path = _report(kind, f"{kind}: {summary}\n{detail}")
    return 2, f"{kind}: {summary[:120]} (full report: {path})"


def run_case(a, codes, scales, row_offsets, transform, model, cta_k, splits):
    import mxdiff
    kernel = _load()
    mode = os.environ.get("MXDIFF_PYTHON_MODE", "bits")
    rows, n = a.shape[0], codes.shape[1]
    inputs = (a, codes, scales, row_offsets)
    if os.environ.get("MXDIFF_PYTHON_DEVICE", "cpu") == "cuda":
        import torch
        inputs = tuple(torch.from_numpy(np.array(x.view(np.int16) if x.dtype == np.float16 else x)).cuda()
                       for x in inputs)
        inputs = (inputs[0].view(torch.float16),) + inputs[1:]
    start = time.monotonic()
    try:
        settings = {"transform": _TRANSFORMS[transform], "model": _MODELS[model], "cta_k": cta_k, "splits": splits}
        result = kernel(*inputs, **{name: settings[name] for name in _settings})
    except TimeoutError as error:
        if "MXDIFF_PYTHON_TIMEOUT" in str(error):
            return _fail("python/timeout", str(error), traceback.format_exc())
        return _fail("python/raised", f"{type(error).__name__}: {error}", traceback.format_exc())
    except Exception as error:
        return _fail("python/raised", f"{type(error).__name__}: {error}", traceback.format_exc())
    finally:
        _stats["calls"] += 1
        _stats["seconds"] += time.monotonic() - start
    output, problem = mxdiff._kernel_output(result, rows, n)
    if output is None:
        return _fail("python/shape", problem)
    bits = output.view(np.uint16)
    if mode == "bits":
        return 0, bits
    status, exact, low, high = mxdiff._core.bound_verdicts(a, codes, scales, row_offsets, n, a.shape[1],
                                                           _TRANSFORMS[transform], bits, max(1, a.shape[1] // 32))
    bad = np.argwhere(status != 0)
    if len(bad):
        r, c = (int(x) for x in bad[0])
        kind = "python/specials" if status[r, c] == 2 else "python/bound"
        return _fail(kind, f"{len(bad)} elements outside the bound; first ({r}, {c}): kernel {float(output[r, c])!r}, "
                           f"allowed [{float(low[r, c])!r}, {float(high[r, c])!r}], exact {float(exact[r, c])!r}")
    reference = mxdiff._core.reference_gemm(a, codes, scales, row_offsets, n, a.shape[1], _TRANSFORMS[transform],
                                            _MODELS[model], cta_k, splits, 1)
    return 0, reference
