"""The Python side of python/embed/ (libmxdiff_python_kernel.so): fuzz_gemm and repro load that
library as an external kernel (fuzz/modules/mxdiff_kernel_abi.h); it calls `run_case` here for
every case with read-only NumPy views of the host memory; the kernel gets copies of them (a kernel
that writes into its inputs is python/inputs-modified, never judged on what it wrote).

Environment: MXDIFF_PYTHON=module:function (the kernel; it also gets the case's transform, model,
cta_k and splits as keyword arguments where its signature names them), MXDIFF_PYTHON_MODE=bits|bound (bits),
MXDIFF_PYTHON_TRANSFORM=mx-spec (bound mode only: judge against the OCP MX spec's values instead of
the case's SM70 transform; the kernel's `transform` argument is then "mx-spec"),
MXDIFF_PYTHON_DEVICE=cpu|cuda (cuda: torch tensors on the GPU), MXDIFF_PYTHON_REPORTS=DIR
(full reports of raised / shape / timeout / bound findings, traceback included; default
$MXDIFF_FINDINGS_DIR or the working folder).

Returns (0, fp16 bits as a [rows, n] uint16 array) or (2, message). In bound mode an output within
the bound returns the reference's bits for the case's own arithmetic, so fuzz_gemm's bit check
passes; one outside is a failure whose message starts with python/bound or python/specials and
then the cause (_cause_kind).
fuzz_gemm runs every case twice (its determinism check): where the second call's inputs, settings
and kernel output are those of the call before, the bound check's answer is that call's, not
computed again (`_stats["bound_checks"]` / `["bound_reused"]` count both)."""
import hashlib
import importlib
import inspect
import os
import time
import traceback

import numpy as np

from mxdiff import _KernelTimeout as KernelTimeout  # what the library's watchdog raises into the kernel

_kernel = None
timeout_seconds = None  # MXDIFF_PYTHON_TIMEOUT as the library read it (it sets this)
_settings = ()  # the keyword arguments of (transform, model, cta_k, splits) the kernel takes
_stats = {"calls": 0, "seconds": 0.0, "bound_checks": 0, "bound_reused": 0}
_last_bound = None  # (key arrays, answer) of the last bound check (_bound_answer)
_MODELS = ("v100", "sm90-emulated", "sm90-emulated-ftz", "exact")
_TRANSFORMS = ("ordinary", "folded")


def _load():
    global _kernel, _settings
    if _kernel is None:
        _contract()  # a transform bound mode cannot judge fails here, before any case
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


def _report_folder():
    """Where the full reports go (the library asks too, for a kernel that never comes back)."""
    folder = os.environ.get("MXDIFF_PYTHON_REPORTS") or os.environ.get("MXDIFF_FINDINGS_DIR") or "."
    os.makedirs(folder, exist_ok=True)
    return os.path.abspath(folder)


def _report(kind, text):
    folder = _report_folder()
    path = os.path.join(folder, f"{kind.replace('/', '.')}.{hashlib.sha1(text.encode()).hexdigest()[:12]}.txt")
    with open(path, "w") as f:
        f.write(text)
    return path


def _fail(kind, summary, detail=""):
    path = _report(kind, f"{kind}: {summary}\n{detail}")
    return 2, f"{kind}: {summary[:120]} (full report: {path})"


def _contract():
    """MXDIFF_PYTHON_TRANSFORM: None (the case's own transform) or "mx-spec", which only bound mode
    can judge (mxdiff._check_settings); anything else is a ValueError, which _load raises when the
    library starts (python/init: nothing is compared)."""
    import mxdiff
    chosen = os.environ.get("MXDIFF_PYTHON_TRANSFORM", "")
    if chosen in ("", "case"):
        return None
    if chosen != mxdiff.MX_SPEC:
        raise ValueError(f"MXDIFF_PYTHON_TRANSFORM={chosen!r}: expected {mxdiff.MX_SPEC!r} (or unset: the case's "
                         f"own transform, {' or '.join(mxdiff.TRANSFORMS)})")
    mxdiff._check_settings(os.environ.get("MXDIFF_PYTHON_MODE", "bits"), chosen, _MODELS[0])
    return chosen


def run_case(a, codes, scales, row_offsets, transform, model, cta_k, splits):
    import mxdiff
    kernel = _load()
    mode = os.environ.get("MXDIFF_PYTHON_MODE", "bits")
    contract = _contract()  # checked when the library loaded the kernel (_load): python/init
    rows, n = a.shape[0], codes.shape[1]
    # The kernel gets copies (mxdiff.check's rule): the bound check below and fuzz_gemm's oracle
    # read the harness's buffers, which the kernel never sees.
    given = mxdiff._private_inputs((a, codes, scales, row_offsets))
    inputs = given
    if os.environ.get("MXDIFF_PYTHON_DEVICE", "cpu") == "cuda":
        inputs = _to_device(inputs)
    start = time.monotonic()
    try:
        settings = {"transform": contract or _TRANSFORMS[transform], "model": _MODELS[model], "cta_k": cta_k,
                    "splits": splits}
        result = kernel(*inputs, **{name: settings[name] for name in _settings})
    except KernelTimeout:
        return _fail("python/timeout", f"MXDIFF_PYTHON_TIMEOUT: the kernel ran past {timeout_seconds} s",
                     traceback.format_exc())
    except (Exception, SystemExit) as error:  # sys.exit() in the kernel must not end the fuzzer clean
        return _fail("python/raised", f"{type(error).__name__}: {error}", traceback.format_exc())
    finally:
        _stats["calls"] += 1
        _stats["seconds"] += time.monotonic() - start
    modified = mxdiff._modified_input((a, codes, scales, row_offsets), given)
    if modified:
        return _fail("python/inputs-modified", modified)
    output, problem = mxdiff._kernel_output(result, rows, n)
    if output is None:
        return _fail("python/shape", problem)
    bits = output.view(np.uint16)
    if mode == "bits":
        return 0, bits
    return _bound_answer(a, codes, scales, row_offsets, (transform, model, cta_k, splits), bits, contract)


def _to_device(inputs):
    """The four host views as torch tensors on the GPU: one copy each, straight from the host
    memory (torch warns that the views are read-only; the tensors are only read)."""
    import warnings

    import torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return tuple(torch.from_numpy(x).to("cuda") for x in inputs)


def _bound_key(a, codes, scales, row_offsets, settings, bits):
    """What the bound check's answer depends on: the settings, the row offsets, the activations,
    the weights of the groups with rows (no output element reads another group) and the output,
    each as its bytes (NaN bits compare equal)."""
    offsets = np.asarray(row_offsets)
    used = np.flatnonzero(offsets[1:] > offsets[:-1])
    arrays = (offsets, a, codes[used], scales[used], bits)
    return settings, tuple(np.array(x, copy=True).reshape(-1).view(np.uint8) for x in arrays)


def _same_key(x, y):
    return x[0] == y[0] and all(p.shape == q.shape and np.array_equal(p, q) for p, q in zip(x[1], y[1]))


def _cause_kind(kind, a, codes, scales, row_offsets, transform, row, column):
    """kind/<how the element's weights deviate from the MX spec, or on-spec>[/<its activations'
    specials>], e.g. python/bound/flushed-to-zero or python/specials/on-spec/nan-activations: fuzz_gemm
    signs a finding with it, so a kernel that follows the spec where the contract flushes and one that
    loses a NaN are kept apart, not one finding for both."""
    import mxdiff
    weights = "_".join(mxdiff.spec_deviation_counts_of_column(codes, scales, row_offsets, transform, row, column))
    specials = [name for name, count in mxdiff.activation_specials_of_row(a, row).items() if count]
    return f"{kind}/{weights or 'on-spec'}" + (f"/{'_'.join(specials)}-activations" if specials else "")


def _spec_cause_kind(kind, a, scales, row_offsets, row, column):
    """_cause_kind under mx-spec: kind/mx-spec/<the element's scale ranges>[/<its activations'
    specials>], e.g. python/bound/mx-spec/below-fp16: no SM70 deviation applies, and the range of
    the scales keeps apart a kernel that flushes tiny weights and one that overflows large ones."""
    import mxdiff
    ranges = "_".join(mxdiff.spec_scale_ranges_of_column(scales, row_offsets, row, column))
    specials = [name for name, count in mxdiff.activation_specials_of_row(a, row).items() if count]
    return f"{kind}/mx-spec/{ranges}" + (f"/{'_'.join(specials)}-activations" if specials else "")


def _bound_answer(a, codes, scales, row_offsets, settings, bits, contract=None):
    """run_case's answer in bound mode, reused where the call before had the same key."""
    global _last_bound
    import mxdiff
    key = _bound_key(a, codes, scales, row_offsets, settings + (contract,), bits)
    if _last_bound is not None and _same_key(_last_bound[0], key):
        _stats["bound_reused"] += 1
        return _last_bound[1]
    _stats["bound_checks"] += 1
    transform, model, cta_k, splits = settings
    n, k = codes.shape[1], a.shape[1]
    judged = contract or _TRANSFORMS[transform]
    status, exact, low, high = mxdiff._core.bound_verdicts(a, codes, scales, row_offsets, n, k, judged, bits,
                                                           max(1, k // 32))
    bad = np.argwhere(status != 0)
    if len(bad) and contract == mxdiff.MX_SPEC:
        r, c = (int(x) for x in bad[0])
        kind = _spec_cause_kind("python/specials" if status[r, c] == 2 else "python/bound", a, scales, row_offsets,
                                r, c)
        # The summary is cut at 120 characters in fuzz_gemm's finding: the element and values first.
        answer = _fail(kind, mxdiff.bound_message(contract, len(bad), a.shape[0] * n, int(status[r, c]), r, c,
                                                  bits[r, c], exact[r, c], low[r, c], high[r, c]),
                       mxdiff.explain_spec_element(a, codes, scales, row_offsets, r, c))
    elif len(bad):
        r, c = (int(x) for x in bad[0])
        name = _TRANSFORMS[transform]
        kind = _cause_kind("python/specials" if status[r, c] == 2 else "python/bound", a, codes, scales, row_offsets,
                           name, r, c)
        output = bits.view(np.float16)
        # Why, first: the summary is cut at 120 characters in fuzz_gemm's finding.
        deviations = mxdiff.spec_deviations_of_column(codes, scales, row_offsets, name, r, c)
        answer = _fail(kind, f"{len(bad)} elements outside the bound; first ({r}, {c}): weights vs the MX spec: "
                             f"{deviations}; kernel "
                             f"{float(output[r, c])!r}, allowed [{float(low[r, c])!r}, {float(high[r, c])!r}], "
                             f"exact {float(exact[r, c])!r}",
                       mxdiff.explain_element(a, codes, scales, row_offsets, name, r, c))
    else:
        answer = 0, mxdiff._core.reference_gemm(a, codes, scales, row_offsets, n, k, _TRANSFORMS[transform],
                                                _MODELS[model], cta_k, splits, 0)
    _last_bound = (key, answer)
    return answer
