"""The two kernels of gpu_kernels.py against mxdiff's bound (python/gpu/README.md). Needs torch and
Triton: run on the GPU machine by run_on_gpu.sh; without a GPU the Triton kernel runs in Triton's
interpreter (TRITON_INTERPRET=1, set here) and the torch one on the CPU:

    python3 -m pytest -q python/gpu/test_gpu_kernels.py"""
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before gpu_kernels' @triton.jit
pytest.importorskip("triton")

import mxdiff  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_kernels  # noqa: E402

# Routed groups among empty ones, as in a real MoE layer (6 of 256 experts have rows).
EMPTY_GROUPS = (0, 3, 0, 0, 2, 0, 1, 0)


def synced(kernel):
    def run(*inputs):
        out = kernel(*inputs)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return out
    return run


@pytest.mark.parametrize("name", sorted(gpu_kernels.KERNELS))
@pytest.mark.parametrize("seed", [1, 2])
def test_kernel_is_within_the_bound_with_empty_groups(name, seed, tmp_path):
    case = mxdiff.generate_case(seed, 64, 256, EMPTY_GROUPS, activations="normal", codes="normal", scales="normal")
    findings = mxdiff.check(synced(gpu_kernels.KERNELS[name]), [case], mode="bound", out_dir=str(tmp_path))
    assert not findings, "\n".join(str(f) for f in findings)


@pytest.mark.parametrize("name", sorted(gpu_kernels.KERNELS))
def test_empty_groups_change_no_bit(name):
    """The kernel on the layer and on its routed groups alone gives the same bits: an empty
    group's weights (here all NaN scales) are never read."""
    case = mxdiff.generate_case(3, 64, 256, EMPTY_GROUPS, activations="normal", codes="normal", scales="normal")
    a, codes, scales, offsets = (np.array(x) for x in (case.activations, case.codes, case.scales, case.row_offsets))
    routed = np.flatnonzero(np.diff(offsets) > 0)
    empty = np.setdiff1d(np.arange(len(offsets) - 1), routed)
    # Finite sums (the generated tensors may hold NaN and Inf, which would hide a difference).
    a[...] = np.random.default_rng(3).standard_normal(a.shape).astype(np.float16)
    scales[routed] = 120 + scales[routed] % 12
    scales[empty] = 255
    compact = np.concatenate([[0], np.cumsum(np.diff(offsets)[routed])]).astype(np.int32)
    kernel = synced(gpu_kernels.KERNELS[name])
    full = kernel(a, codes, scales, offsets).cpu().numpy().view(np.uint16)
    alone = kernel(a, codes[routed], scales[routed], compact).cpu().numpy().view(np.uint16)
    assert np.array_equal(full, alone)
    assert not np.isnan(full.view(np.float16)).any()


def test_torch_kernel_dequantizes_only_the_routed_groups():
    """The eager kernel made [groups, n, k] float32 weights for every expert: on a real layer (256
    experts x 1024 x 4096, 6 routed) that is 4 GiB per temporary, for 6 experts' work."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Largest(TorchDispatchMode):
        numel = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor):
                    Largest.numel = max(Largest.numel, t.numel())
            return out

    n, k = 64, 256
    rows = [0] * 64
    rows[5], rows[40] = 2, 1
    case = mxdiff.generate_case(4, n, k, rows, activations="normal", codes="normal", scales="normal")
    # torch tensors on the device already (as MXDIFF_PYTHON_DEVICE=cuda hands them): only the
    # kernel's own temporaries are measured.
    inputs = tuple(torch.from_numpy(np.array(x)).to(gpu_kernels._device())
                   for x in (case.activations, case.codes, case.scales, case.row_offsets))
    with Largest():
        gpu_kernels.torch_dequant_matmul(*inputs)
    assert Largest.numel <= 2 * n * k, f"a temporary of {Largest.numel} elements: more than one group's weights"


def compiled_variants(function):
    """How many variants of a @triton.jit function this process compiled (Triton 3.x keeps them per
    device: device_caches[device][0], older ones in cache[device])."""
    caches = getattr(function, "device_caches", None)
    if caches is not None:
        return sum(len(entry[0]) for entry in caches.values())
    cache = getattr(function, "cache", None)
    if isinstance(cache, dict):
        return sum(len(entry) for entry in cache.values())
    pytest.skip("this Triton keeps its compiled kernels where this test does not look")


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1", reason="the interpreter compiles nothing")
def test_triton_kernel_compiles_once_for_every_shape():
    """New sizes (M == 1 or not, N and k/32 multiples of 16 or not) and slices at any offset reuse the
    one variant of the block configuration: a fuzzer changes the shape on every case."""
    shapes = ((64, 256, [1]), (1000, 4096, [0, 3, 0, 1]), (96, 160, [2, 1]), (4096, 512, [0] * 5 + [1] * 6),
              (128, 32, [5]), (2048, 1024, [1, 0, 7]))
    for seed, (n, k, rows) in enumerate(shapes):
        case = mxdiff.generate_case(seed, n, k, rows, activations="normal", codes="normal", scales="normal")
        synced(gpu_kernels.triton_dot_scaled)(case.activations, case.codes, case.scales, case.row_offsets)
    assert compiled_variants(gpu_kernels._mxfp4_group_kernel) == 1
