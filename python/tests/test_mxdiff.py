import ctypes
import os
import shlex
import subprocess
import sys

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


def test_audit_gives_its_errors_and_takes_one_path_as_bytes(tmp_path):
    missing = mxdiff.audit("/nonexistent")
    # The text report only counts the errors (mxdiff audit prints them on stderr): the result has them.
    assert missing.status == 2 and missing.errors and "/nonexistent" in missing.errors[0], missing
    path = tmp_path / "x.safetensors"
    path.write_bytes(b"not a checkpoint")
    as_bytes = mxdiff.audit(os.fsencode(path))  # one path, not a sequence of byte values
    assert as_bytes == mxdiff.audit(str(path)) and as_bytes.errors and str(path) in as_bytes.errors[0]
    with pytest.raises(ValueError, match=r"^pattern is empty"):
        mxdiff.audit(str(path), pattern="")


def test_integer_arguments_out_of_range_name_the_argument_and_its_range():
    with pytest.raises(OverflowError, match=r"seed=18446744073709551616 is out of range: an integer in \[0, "):
        mxdiff.generate_case(1 << 64, 16, 64, [1])
    with pytest.raises(OverflowError, match=r"n=1099511627776 is out of range: an integer in \[-2147483648, "):
        mxdiff.generate_case(1, 1 << 40, 64, [1])
    case = mxdiff.generate_case(3, 16, 64, [2, 1])
    with pytest.raises(OverflowError, match=r"^k=-2147483649 is out of range"):
        mxdiff.reference_gemm(case.activations, case.codes, case.scales, case.row_offsets, case.n, -(1 << 31) - 1)
    with pytest.raises(OverflowError, match=r"tactic.splits=4294967296"):
        case.reference(tactic=(32, 1 << 32))
    with pytest.raises(OverflowError, match=r"raw=256 is out of range: an integer in \[0, 255\]"):
        mxdiff.prepared_scale("ordinary", 256)  # was read as raw 0
    with pytest.raises(OverflowError, match=r"splits=2147483648"):
        case.splits = 1 << 31
    with pytest.raises(OverflowError, match=r"steps="):
        mxdiff.model_error_bound(1.0, 1 << 31, 1)
    with pytest.raises(TypeError, match="n must be an integer, not float"):
        mxdiff.generate_case(1, 16.0, 64, [1])


def test_reference_gemm_checks_the_documented_shapes():
    case = mxdiff.generate_case(3, 16, 64, [2, 1])  # codes [2, 16, 32]: transposed, [2, 32, 16], same size
    args = [case.activations, case.codes, case.scales, case.row_offsets]
    for index, name, wrong in ((1, "codes", np.ascontiguousarray(case.codes.transpose(0, 2, 1))),
                               (2, "scales", np.ascontiguousarray(case.scales.transpose(0, 2, 1))),
                               (0, "activations", case.activations.reshape(case.k, case.rows)),
                               (1, "codes", case.codes.reshape(-1))):
        bad = list(args)
        bad[index] = wrong
        with pytest.raises(ValueError, match=f"^{name}: shape .* is not \\["):
            mxdiff.reference_gemm(*bad, case.n, case.k)


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


@pytest.mark.parametrize("make, message", [(lambda tmp: os.mkfifo(tmp / "fifo.case") or tmp / "fifo.case",
                                            "not a regular file (a FIFO)"),
                                           (lambda tmp: "/dev/zero", "larger than any case can be")])
def test_read_case_refuses_what_would_hang_it(tmp_path, make, message):
    """As repro does (tools/cli/input_file.h, its size limit). In a child with a time limit: the
    read hung forever before."""
    path = make(tmp_path)
    child = subprocess.run([sys.executable, "-c", "import sys, mxdiff; mxdiff.read_case(sys.argv[1])", str(path)],
                           capture_output=True, text=True, timeout=60)
    assert child.returncode == 1 and "ValueError: " + str(path) in child.stderr, child.stderr
    assert message in child.stderr.splitlines()[-1], child.stderr


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


def flush_subnormals_in_place(a, way):
    flushed = np.where(np.abs(a.astype(np.float32)) < 2.0 ** -14, np.float16(0), a)
    if way == "flag":  # the read-only flag is only a flag where numpy lets it be set back
        a.flags.writeable = True
        a[...] = flushed
    else:  # a raw pointer: nothing stops it but a copy
        ctypes.memmove(a.ctypes.data, flushed.ctypes.data, a.nbytes)


@pytest.mark.parametrize("mode", ("bits", "bound"))
@pytest.mark.parametrize("way", ("flag", "pointer"))
def test_a_kernel_that_writes_into_its_inputs_cannot_hide_its_defect(mode, way, tmp_path):
    """Flushes subnormal activations in its input, then computes correctly on them: a reference
    computed from the same arrays after the call agreed with it."""
    def kernel(a, codes, scales, row_offsets):
        flush_subnormals_in_place(a, way)
        return (sm90_kernel if mode == "bits" else float64_kernel)(a, codes, scales, row_offsets)

    subnormal = mxdiff.generate_case(7, 16, 128, [3, 0, 2], activations="subnormal", codes="normal", scales="normal")
    before = subnormal.encode()
    findings = mxdiff.check(kernel, [subnormal], mode=mode, out_dir=str(tmp_path))
    assert subnormal.encode() == before  # the case itself is untouched
    kinds = [f.kind for f in findings]
    if way == "flag":
        assert kinds == ["python/raised"] and "WRITEABLE" in findings[0].message, findings
        return
    assert kinds[0] == "python/inputs-modified" and len(kinds) == 2, kinds
    assert kinds[1] == ("python/bits" if mode == "bits" else "python/bound"), kinds
    assert findings[0].message.startswith("the kernel wrote into its input activations: "), findings[0].message
    assert " became 0x0000 (0.0)" in findings[0].message, findings[0].message
    # The written case is the input as the kernel got it, not as it left it.
    assert mxdiff.read_case(findings[0].case_path).encode() == mxdiff.read_case(findings[1].case_path).encode()
    assert np.array_equal(mxdiff.read_case(findings[0].case_path).activations.view(np.uint16),
                          subnormal.activations.view(np.uint16))


def test_a_kernel_that_calls_sys_exit_is_a_finding():
    findings = mxdiff.check(lambda *inputs: sys.exit(0), cases()[:1])
    assert [f.kind for f in findings] == ["python/raised"] and findings[0].message == "SystemExit: 0"


def test_repro_explains_a_finding(tmp_path, request, monkeypatch):
    """The finding prints a command that runs: $MXDIFF_REPRO's program where it is set."""
    repro = request.config.getoption("--mxdiff-reference-bits")
    if not repro:
        pytest.fail("needs --mxdiff-reference-bits")
    repro = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(repro))), "tools", "repro", "repro")
    kernel = lambda *args: sm90_kernel(*args, defect="scale-exponent")
    finding = mxdiff.check(kernel, cases()[:1], out_dir=str(tmp_path / "it's here"))[0]
    monkeypatch.delenv("MXDIFF_REPRO", raising=False)
    assert str(finding).endswith(f"(explain: build-fuzz/tools/repro/repro {shlex.quote(finding.case_path)})")
    monkeypatch.setenv("MXDIFF_REPRO", repro)
    command = str(finding).split("(explain: ")[1][:-1]
    assert shlex.split(command) == [repro, finding.case_path]
    result = subprocess.run(shlex.split(command), capture_output=True, text=True)  # the words a shell would run
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
    infinite = np.isinf(good)
    assert infinite.any() and not infinite[1].any()
    wrong_sign = good.copy()
    wrong_sign[infinite] = -wrong_sign[infinite]  # each Inf kept, each of the other sign
    findings = mxdiff.check(lambda *args: wrong_sign, [mutable], mode="bound")
    assert [f.kind for f in findings] == ["python/specials"]
    assert findings[0].mismatches == int(infinite.sum()), findings[0].message


# ------------------------------------------------------------------ the pytest plugin
def test_the_plugin_finds_a_kernel_that_writes_into_its_inputs(pytester):
    pytester.makepyfile(test_in_place='''
import ctypes

import numpy as np

import mxdiff


def flushes_in_place(a, codes, scales, row_offsets):
    flushed = np.where(np.abs(a.astype(np.float32)) < 2.0 ** -14, np.float16(0), a)
    ctypes.memmove(a.ctypes.data, flushed.ctypes.data, a.nbytes)
    return mxdiff.reference_gemm(a, codes, scales, row_offsets, codes.shape[1], a.shape[1])


def test_generated(mxdiff_case, mxdiff_check):
    mxdiff_check(flushes_in_place, mxdiff_case)


def test_subnormal(mxdiff_check):
    mxdiff_check(flushes_in_place, mxdiff.generate_case(7, 16, 128, [3, 0, 2], activations="subnormal"))
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--mxdiff-cases=8")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1, result.stdout.str()
    assert "test_in_place.py::test_subnormal FAILED" in result.stdout.str() or \
        "FAILED test_in_place.py::test_subnormal" in result.stdout.str(), result.stdout.str()
    assert "python/inputs-modified: the kernel wrote into its input activations" in result.stdout.str()


def test_plugin_parametrizes_over_generated_and_corpus_cases(mxdiff_case, mxdiff_check):
    mxdiff_check(sm90_kernel, mxdiff_case, model=mxdiff_case.model if mxdiff_case.model == "sm90-emulated" else
                 "sm90-emulated", transform="ordinary", tactic=(32, 1))
