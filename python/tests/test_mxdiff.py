import os
import subprocess

import numpy as np
import pytest

import mxdiff
from kernels import float64_kernel, sm90_kernel

DEFECTS = ("scale-exponent", "dropped-block", "flushed-subnormal")


def cases():
    # Generated cases of every shape, plus ones that carry what each defect needs to show.
    return (mxdiff.generate_cases(16, seed=1)
            + [mxdiff.generate_case(7, 16, 128, [3, 0, 2], activations="subnormal", codes="normal", scales="normal"),
               mxdiff.generate_case(8, 8, 96, [4], activations="specials", codes="specials", scales="specials"),
               mxdiff.generate_case(9, 24, 64, [2, 2], activations="uniform", codes="uniform", scales="uniform")])


# ------------------------------------------------------------------ formats and rules
def test_e2m1_round_trip():
    codes = np.arange(16, dtype=np.uint8)
    values = mxdiff.e2m1_decode(codes)
    assert values.tolist()[:8] == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert mxdiff.e2m1_encode(values).tolist() == codes.tolist()  # -0.0 is code 8
    assert mxdiff.e2m1_encode([0.25, 0.75, 2.5, 5.0, 100.0, -7.0]).tolist() == [0, 2, 4, 6, 7, 15]


def test_e8m0():
    assert mxdiff.e8m0_decode([127, 128, 0, 254]).tolist() == [1.0, 2.0, 2.0 ** -127, 2.0 ** 127]
    assert np.isnan(mxdiff.e8m0_decode([255])[0])
    assert mxdiff.e8m0_encode([1.0, 3.0, 0.5, float("nan")]).tolist() == [127, 128, 126, 255]


def test_transform_table_is_the_dequantize_of_every_pair():
    for transform in mxdiff.TRANSFORMS:
        table = mxdiff.transform_table(transform)
        raw, code = np.meshgrid(np.arange(256), np.arange(16), indexing="ij")
        assert np.array_equal(table.view(np.uint16),
                              mxdiff.dequantize(transform, code.astype(np.uint8), raw.astype(np.uint8)).view(np.uint16))
    assert float(mxdiff.transform_table("ordinary")[127, 2]) == 1.0
    assert float(mxdiff.transform_table("ordinary")[100, 2]) == 0.0  # raw <= 112 flushes


def test_admit_is_the_cpp_rule():
    first, last = (int(x) for x in mxdiff.fold_admitted_set().split(".."))
    assert mxdiff.admit(np.arange(first, last + 1, dtype=np.uint8)).admitted
    verdict = mxdiff.admit(np.array([120, first - 1, 255, 120], dtype=np.uint8))
    assert not verdict.admitted and verdict.refused_count == 2
    assert verdict.refused == [(1, first - 1), (2, 255)]
    assert verdict.rule_version == mxdiff.admission_rule_version()


def test_audit_reports_an_error_on_a_file_that_is_no_checkpoint(tmp_path):
    path = tmp_path / "x.safetensors"
    path.write_bytes(b"not a checkpoint")
    report = mxdiff.audit(path)
    assert report.status == 2 and report.report


# ------------------------------------------------------------------ cases
def test_case_round_trip(tmp_path):
    case = mxdiff.generate_case(3, 16, 64, [2, 0, 1], model="v100", tactic=(32, 2))
    path = case.write(tmp_path / "a.case")
    again = mxdiff.read_case(path)
    assert again.encode() == case.encode()
    assert (again.groups, again.n, again.k, again.rows, again.model, again.splits) == (3, 16, 64, 3, "v100", 2)
    assert np.array_equal(again.activations.view(np.uint16), case.activations.view(np.uint16))
    assert "activations" in again.describe()
    with pytest.raises(ValueError):
        mxdiff.decode_case(b"MXDF\x02garbage")


def test_reference_gemm_takes_numpy_and_refuses_other_dtypes():
    case = mxdiff.generate_case(5, 16, 256, [4], activations="normal", codes="normal", scales="normal")
    one = case.reference(tactic=(32, 1))
    f32 = mxdiff.reference_gemm(case.activations, case.codes, case.scales, case.row_offsets, case.n, case.k,
                                f32=True)
    assert one.dtype == np.float16 and one.shape == (4, 16)
    assert np.array_equal(one.view(np.uint16), sm90_kernel(case.activations, case.codes, case.scales,
                                                           case.row_offsets).view(np.uint16))
    assert np.array_equal(f32.astype(np.float16).view(np.uint16), one.view(np.uint16))
    with pytest.raises(TypeError):
        mxdiff.reference_gemm(case.activations.astype(np.float32), case.codes, case.scales, case.row_offsets,
                              case.n, case.k)


class DLPackOnly:
    """Only the DLPack protocol, as a PyTorch CPU tensor offers it (no torch here)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_reference_gemm_reads_dlpack_producers_in_place():
    case = mxdiff.generate_case(3, 16, 64, [2, 1])
    args = [DLPackOnly(np.ascontiguousarray(x)) for x in (case.activations, case.codes, case.scales,
                                                           case.row_offsets)]
    out = mxdiff.reference_gemm(*args, case.n, case.k)
    assert np.array_equal(out.view(np.uint16), case.reference().view(np.uint16))
    with pytest.raises(TypeError):  # the dtype is still checked
        mxdiff.reference_gemm(DLPackOnly(case.activations.astype(np.float32)), *args[1:], case.n, case.k)


def test_reference_gemm_equals_the_cpp_oracle_on_the_corpus(request):
    helper = request.config.getoption("--mxdiff-reference-bits")
    corpus = request.config.getoption("--mxdiff-corpus")
    if not helper or not corpus:
        pytest.fail("needs --mxdiff-reference-bits and --mxdiff-corpus (ctest python_package_pytest passes both)")
    from mxdiff.pytest_plugin import corpus_files
    files = [f for f in corpus_files(corpus)
             if np.prod(mxdiff._core.case_shape(open(f, "rb").read())[:3]) <= 1 << 24]
    assert len(files) >= 40
    lines = subprocess.run([helper, *files], check=True, capture_output=True, text=True).stdout.splitlines()
    assert len(lines) == len(files)
    compared = 0
    for path, line in zip(files, lines):
        name, rows, n, hexbits = (line.split(" ") + [""])[:4]
        assert name == path
        case = mxdiff.read_case(path)
        if rows == "error":
            with pytest.raises(ValueError):
                case.reference()
            continue
        ours = case.reference().view(np.uint16)
        theirs = np.frombuffer(bytes.fromhex(hexbits), dtype=">u2").reshape(int(rows), int(n))
        assert np.array_equal(ours, theirs), path
        compared += 1
    assert compared >= 40


# ------------------------------------------------------------------ check, bits mode
def test_bits_mode_passes_the_correct_numpy_kernel():
    assert mxdiff.check(sm90_kernel, cases(), model="sm90-emulated") == []


@pytest.mark.parametrize("defect", DEFECTS)
def test_bits_mode_finds_each_planted_defect(defect, tmp_path):
    kernel = lambda *args: sm90_kernel(*args, defect=defect)
    findings = mxdiff.check(kernel, cases(), model="sm90-emulated", out_dir=str(tmp_path))
    assert findings, defect
    assert all(f.kind == "python/bits" for f in findings)
    first = findings[0]
    assert os.path.exists(first.case_path) and first.mismatches > 0
    written = mxdiff.read_case(first.case_path)
    assert (written.model, written.request) == ("sm90-emulated", "ordinary")
    assert "reproduced by: none" in first.message  # no arithmetic of ours explains a defect


def cancelling_case():
    """2^30 + 2^-9 - 2^30 in one m8n8k4 step: only the exact model keeps the 2^-9."""
    case = mxdiff.generate_case(0, 1, 64, [1])
    case._data.drop_recipes()
    case.codes[...] = 0x22  # code 2 (1.0) in both nibbles
    case.scales[...] = 142  # weights 2^15 under the ordinary transform
    case.activations[...] = 0
    case.activations[0, :3] = [32768.0, 2.0 ** -24, -32768.0]
    return case


def test_bits_mode_names_the_arithmetic_that_reproduces_the_kernel():
    case = cancelling_case()
    exact = case.reference(model="exact", tactic=(32, 1))
    assert float(exact[0, 0]) == 2.0 ** -9
    findings = mxdiff.check(lambda *args: np.array(exact), [case], model="v100")
    assert len(findings) == 1
    assert ("ordinary", "exact", 1) in findings[0].reproduced_by  # (2 splits too: the second one adds +0)
    assert {model for _, model, _ in findings[0].reproduced_by} == {"exact"}
    assert "reproduced by: ordinary exact splits 1" in findings[0].message


def test_a_kernel_that_raises_or_returns_the_wrong_shape_is_a_finding(tmp_path):
    def broken(a, codes, scales, row_offsets):
        raise RuntimeError("kernel exploded")

    findings = mxdiff.check(broken, cases()[:2], out_dir=str(tmp_path))
    assert [f.kind for f in findings] == ["python/raised"] * 2
    assert "kernel exploded" in findings[0].traceback and "broken" in findings[0].traceback
    wrong_dtype = lambda *args: sm90_kernel(*args).astype(np.float32)
    wrong_shape = lambda *args: sm90_kernel(*args)[:, :-1]
    for kernel in (wrong_dtype, wrong_shape, lambda *args: None):
        assert [f.kind for f in mxdiff.check(kernel, cases()[:1])] == ["python/shape"]


def test_a_kernel_past_the_timeout_is_a_finding():
    def spins(a, codes, scales, row_offsets):
        while True:
            pass

    findings = mxdiff.check(spins, cases()[:1], timeout=0.5)
    assert [f.kind for f in findings] == ["python/timeout"]
    assert "spins" in findings[0].traceback
    assert mxdiff.check(sm90_kernel, cases()[:3], timeout=30) == []


def test_the_kernel_gets_read_only_inputs():
    def writes(a, codes, scales, row_offsets):
        scales[...] = 0
        return sm90_kernel(a, codes, scales, row_offsets)

    assert [f.kind for f in mxdiff.check(writes, cases()[:1])] == ["python/raised"]


def test_repro_explains_a_finding(tmp_path, request):
    repro = request.config.getoption("--mxdiff-reference-bits")
    if not repro:
        pytest.fail("needs --mxdiff-reference-bits")
    repro = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(repro))), "tools", "repro", "repro")
    kernel = lambda *args: sm90_kernel(*args, defect="scale-exponent")
    finding = mxdiff.check(kernel, cases()[:1], out_dir=str(tmp_path))[0]
    result = subprocess.run([repro, finding.case_path], capture_output=True, text=True)
    assert result.returncode in (0, 1), result.stderr
    assert "sm90-emulated" in result.stdout


# ------------------------------------------------------------------ check, bound mode
def test_bound_mode_passes_a_float64_kernel_and_the_exact_oracle_bits():
    all_cases = cases() + mxdiff.generate_cases(24, seed=2)
    assert mxdiff.check(float64_kernel, all_cases, mode="bound") == []
    assert mxdiff.check(sm90_kernel, all_cases, mode="bound") == []


@pytest.mark.parametrize("defect", ("scale-exponent", "dropped-block", "flushed-subnormal", "nan-0xff"))
def test_bound_mode_finds_a_gross_defect(defect):
    kernel = lambda *args: float64_kernel(*args, defect=defect)
    # A 0xFF block in four columns, codes +-1 and +-1.5 and small activations: under the contract
    # (ordinary: 0xFF is 2^15) these weights and sums stay finite.
    ff = mxdiff.generate_case(13, 16, 64, [3], activations="normal", codes="narrow", scales="checkpoint")
    ff._data.drop_recipes()
    ff.scales[0, :4, 1] = 255
    ff.activations[...] = (ff.activations.astype(np.float32) * 2.0 ** -8).astype(np.float16)
    assert mxdiff.check(float64_kernel, [ff], mode="bound") == []
    findings = mxdiff.check(kernel, cases() + [ff], mode="bound")
    assert findings and {f.kind for f in findings} <= {"python/bound", "python/specials"}
    assert "allowed [" in next(f.message for f in findings if f.kind == "python/bound")


def test_bound_mode_keeps_nan_and_the_sign_of_inf():
    case = mxdiff.generate_case(12, 8, 32, [2], activations="normal", codes="normal", scales="normal")
    a = np.array(case.activations)
    a[0, 0] = np.inf
    a[1, 0] = np.nan
    mutable = mxdiff.decode_case(case.encode())
    mutable._data.drop_recipes()
    mutable.activations[...] = a
    good = float64_kernel(mutable.activations, mutable.codes, mutable.scales, mutable.row_offsets)
    assert mxdiff.check(lambda *args: good, [mutable], mode="bound") == []
    bad = good.copy()
    bad[1, :] = 0  # NaN lost
    findings = mxdiff.check(lambda *args: bad, [mutable], mode="bound")
    assert [f.kind for f in findings] == ["python/specials"]


# ------------------------------------------------------------------ the pytest plugin
def test_plugin_parametrizes_over_generated_and_corpus_cases(mxdiff_case, mxdiff_check):
    mxdiff_check(sm90_kernel, mxdiff_case, model=mxdiff_case.model if mxdiff_case.model == "sm90-emulated" else
                 "sm90-emulated", transform="ordinary", tactic=(32, 1))
