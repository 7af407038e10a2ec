"""check(mode="bound", transform="mx-spec"): the OCP MX spec's element values as the contract
(docs/numerics.md: "The MX specification as the contract"), in check, the pytest plugin and the
embedded kernel (MXDIFF_PYTHON_TRANSFORM)."""
import os

import numpy as np
import pytest

import mxdiff
from kernels import mx_spec_kernel

SPEC = dict(mode="bound", transform="mx-spec")


def every_scale_byte_case(seed):
    """Column c of each group reads raw scale byte c (0..254 and 0xFF), codes of every value and
    activations large enough (|a| in [2^8, 2^15]) that a weight at raw 112 shows in fp16."""
    case = mxdiff.generate_case(seed, 256, 64, [3, 0, 2], activations="normal", codes="uniform", scales="uniform")
    case._data.drop_recipes()
    case.scales[...] = np.arange(256, dtype=np.uint8)[None, :, None]
    rng = np.random.default_rng(seed)
    magnitude = np.ldexp(1.0, rng.integers(8, 15, size=case.activations.shape)) * rng.uniform(1, 2, case.activations.shape)
    case.activations[...] = (np.where(rng.integers(0, 2, case.activations.shape), -1, 1) * magnitude).astype(np.float16)
    return case


def spec_cases():
    return [every_scale_byte_case(seed) for seed in (1, 2)] + mxdiff.generate_cases(12, seed=5) + [
        mxdiff.generate_case(6, 16, 128, [2, 3], activations="specials", codes="uniform", scales="uniform"),
        mxdiff.generate_case(7, 8, 96, [4], activations="subnormal", codes="specials", scales="specials")]


@pytest.mark.parametrize("dtype", (np.float64, np.float32))
def test_a_kernel_that_follows_the_spec_passes(dtype):
    assert mxdiff.check(lambda *args: mx_spec_kernel(*args, dtype=dtype), spec_cases(), **SPEC) == []


def test_the_sm70_flush_is_found_under_the_spec(tmp_path):
    """The same kernel with raw <= 112 flushed (the SM70 contract's transform) departs from the
    spec; the finding says where, with the spec's exact value, the bound and the kernel's value, and
    names no SM70 deviation."""
    findings = mxdiff.check(lambda *args: mx_spec_kernel(*args, flush_below=113), [every_scale_byte_case(1)],
                            out_dir=str(tmp_path), **SPEC)
    assert [f.kind for f in findings] == ["python/bound"], [str(f) for f in findings]
    r, c = findings[0].first
    assert c <= 112, findings[0].message  # only the flushed columns depart
    assert findings[0].message.startswith(f"first ({r}, {c}): kernel 0x"), findings[0].message
    assert ", spec value " in findings[0].message and "elements off the MX spec" in findings[0].message
    assert "allowed [" in findings[0].message and "below-fp16" in findings[0].message, findings[0].message
    assert "flushed-to-zero" not in findings[0].message and "vs the MX spec under" not in findings[0].message
    assert os.path.exists(findings[0].case_path)
    # Under the SM70 contract the flushed kernel is the right one, and the spec's is the one reported.
    case = every_scale_byte_case(1)
    assert mxdiff.check(lambda *args: mx_spec_kernel(*args, flush_below=113), [case], mode="bound",
                        transform="ordinary") != []


def test_bits_mode_and_unknown_transforms_are_refused():
    with pytest.raises(ValueError, match="has no bits mode"):
        mxdiff.check(mx_spec_kernel, spec_cases()[:1], transform="mx-spec")
    with pytest.raises(ValueError, match="transform must be one of"):
        mxdiff.check(mx_spec_kernel, spec_cases()[:1], mode="bound", transform="spec")


def edge_case(activations, code, raw=254):
    """One row, one column, K 32: `activations` first, zero after; codes `code` on them (0 after),
    scale `raw`."""
    case = mxdiff.generate_case(0, 1, 32, [1], activations="normal", codes="uniform", scales="uniform")
    case._data.drop_recipes()
    a = np.zeros(32, np.float16)
    a[:len(activations)] = activations
    case.activations[0] = a
    codes = np.zeros(32, np.uint8)
    codes[:len(activations)] = code
    case.codes[0, 0] = mxdiff.pack_codes(codes)
    case.scales[...] = raw
    return case


def verdict(case, value):
    return mxdiff.check(lambda *args: np.full((1, 1), value, np.float16), [case], **SPEC)


def test_an_fp32_overflow_is_allowed_only_where_some_order_reaches_it():
    """Products +-2^127 (activation +-2 x weight 0.5 x 2^127): the real sum is 0; an fp32 kernel that
    adds both positives first reaches 2^128, Inf, and then Inf - Inf = NaN, a correct result. With the
    positives 2^127 and 2^127 - 2^116 no order reaches fp32's overflow, and NaN is a finding."""
    reaches = edge_case([2, 2, -2, -2], code=1)
    for value in (0.0, np.nan, np.inf, -np.inf):
        assert verdict(reaches, value) == [], value
    # (A finite value must lie within the bound, here wide: 36 x 2^-24 of |products| 2^129.)
    assert [f.kind for f in verdict(reaches, 1.0)] == []
    # 2^116 less on the positive side: the positives cannot overflow, so no order gives NaN; the real
    # sum is -2^116, whose fp16 value is -Inf.
    below = edge_case([2, 2 - 2.0 ** -10, -2, -2], code=1)
    assert verdict(below, -np.inf) == []
    assert [f.kind for f in verdict(below, 0.0)] == ["python/bound"]
    assert [f.kind for f in verdict(below, np.nan)] == ["python/bound"]
    assert [f.kind for f in verdict(edge_case([2, 2, -2, -(2 - 2.0 ** -10)], code=1), np.nan)] == ["python/bound"]


def test_a_weight_past_fp32s_range_may_be_inf_in_an_fp32_kernel():
    """raw 254 x e2m1 2 = 2^128, past fp32's largest value: an fp32 kernel holds Inf, and Inf x 0 is
    NaN; e2m1 1.5 gives 1.5 x 2^127, an fp32 value, whose zero products must stay 0."""
    assert verdict(edge_case([0, 0], code=4), np.nan) == []
    assert verdict(edge_case([0, 0], code=4), 0.0) == []
    assert [f.kind for f in verdict(edge_case([0, 0], code=3), np.nan)] == ["python/bound"]


def test_a_nan_block_is_nan_for_every_element():
    case = edge_case([1, 0, 0], code=0, raw=255)  # zero codes, zero activations: the spec's NaN all the same
    assert verdict(case, np.nan) == []
    assert [f.kind for f in verdict(case, 0.0)] == ["python/specials"]


def test_the_plugin_takes_the_transform(pytester):
    """--mxdiff-transform=mx-spec makes mxdiff_check judge against the spec (in bound mode, the only
    one it has): the spec's kernel passes, the SM70-flushed one is found."""
    pytester.makepyfile(test_spec=f'''
import sys
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
from kernels import mx_spec_kernel
from test_mx_spec import every_scale_byte_case


def test_spec(mxdiff_case, mxdiff_check):
    mxdiff_check(mx_spec_kernel, mxdiff_case)


def test_flushed(mxdiff_check):
    mxdiff_check(lambda *args: mx_spec_kernel(*args, flush_below=113), every_scale_byte_case(1))
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--mxdiff-cases=8", "--mxdiff-transform=mx-spec")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 8 and outcomes.get("failed") == 1, result.stdout.str()
    assert "FAILED test_spec.py::test_flushed" in result.stdout.str(), result.stdout.str()
    assert "python/bound: " in result.stdout.str() and "off the MX spec" in result.stdout.str()
