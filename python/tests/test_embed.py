"""python/embed/ (libmxdiff_python_kernel.so) under the real harness: repro loads it as fuzz_gemm
does (--external) and runs fuzz_gemm's checks on a corpus case with Python kernels."""
import os
import subprocess
import sys
import time

import pytest

import mxdiff

HERE = os.path.dirname(os.path.abspath(__file__))
EMBED = os.path.join(HERE, "..", "embed")
CASE = os.path.join(HERE, "..", "..", "corpus", "fuzz_gemm", "16x128x32-s1-raw112.case")


@pytest.fixture(scope="module")
def embed_library(tmp_path_factory):
    build = tmp_path_factory.mktemp("embed")
    for command in (["cmake", "-S", EMBED, "-B", str(build), f"-DPython_EXECUTABLE={sys.executable}"],
                    ["cmake", "--build", str(build)]):
        subprocess.run(command, check=True, capture_output=True)
    return str(build / "libmxdiff_python_kernel.so")


@pytest.fixture(scope="module")
def repro(request):
    helper = request.config.getoption("--mxdiff-reference-bits")
    if not helper:
        pytest.fail("needs --mxdiff-reference-bits (ctest python_package_pytest passes it)")
    return os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(helper))), "tools", "repro", "repro")


def run(repro, library, function, tmp_path, case=CASE, **env):
    site = os.path.dirname(os.path.dirname(os.path.abspath(mxdiff.__file__)))
    environment = dict(os.environ, MXDIFF_PYTHON=f"example_kernels:{function}",
                       MXDIFF_PYTHON_PATH=os.pathsep.join([EMBED, site]), MXDIFF_PYTHON_REPORTS=str(tmp_path),
                       MXDIFF_PYTHON_EXECUTABLE=sys.executable, **env)
    return subprocess.run([repro, case, f"--external={library}"], capture_output=True, text=True, env=environment,
                          timeout=120)


def test_a_correct_python_kernel_passes_fuzz_gemms_checks(repro, embed_library, tmp_path):
    result = run(repro, embed_library, "reference", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ext-python" in result.stdout


@pytest.mark.parametrize("function, kind", [("wrong_scale", "mismatch/ext-python"), ("raises", "python/raised"),
                                            ("wrong_shape", "python/shape"), ("hangs", "python/timeout"),
                                            ("hangs_in_numpy", "python/timeout"), ("exits", "python/raised")])
def test_each_python_failure_is_a_finding_of_its_kind(repro, embed_library, tmp_path, function, kind):
    result = run(repro, embed_library, function, tmp_path, MXDIFF_PYTHON_TIMEOUT="2")
    assert result.returncode == 1, result.stdout + result.stderr
    assert kind in result.stdout
    if kind.startswith("python/"):
        # The kind is part of the finding's signature: findings of different kinds stay apart.
        assert f"route/ext-python/unexpected-error/{kind}" in result.stdout, result.stdout
        reports = [name for name in os.listdir(tmp_path) if name.startswith(kind.replace("/", "."))]
        assert reports
        text = open(os.path.join(tmp_path, reports[0])).read()
        if function == "raises":
            assert "Traceback" in text and "this kernel always fails" in text
        if function == "exits":  # sys.exit(0) in the kernel must not end the harness with status 0
            assert "SystemExit: 0" in text


def test_a_kernel_spinning_in_python_times_out_within_the_limit(repro, embed_library, tmp_path):
    """A pure-Python loop never lets go of the GIL by itself: the watchdog must still interrupt it,
    once per call (fuzz_gemm calls the kernel for its check and its determinism rerun)."""
    for function in ("hangs", "hangs_in_numpy"):
        start = time.monotonic()
        result = run(repro, embed_library, function, tmp_path, MXDIFF_PYTHON_TIMEOUT="2")
        elapsed = time.monotonic() - start
        assert result.returncode == 1 and "python/timeout" in result.stdout, result.stdout + result.stderr
        assert elapsed < 2 * 2 + 8, elapsed  # two calls at most, interpreter start and imports


def test_a_kernel_stuck_in_native_code_ends_the_process_as_a_timeout(repro, embed_library, tmp_path):
    start = time.monotonic()
    result = run(repro, embed_library, "hangs_in_native_code", tmp_path, MXDIFF_PYTHON_TIMEOUT="2")
    elapsed = time.monotonic() - start
    assert result.returncode == 1, result.stdout + result.stderr
    assert "python/timeout: the kernel ran past MXDIFF_PYTHON_TIMEOUT=2 s and did not return" in result.stderr
    assert elapsed < 2 + 5 + 8, elapsed  # the limit, the grace, interpreter start and imports
    assert os.path.exists(tmp_path / "python.timeout.native.txt")


def test_a_kernel_that_writes_into_its_inputs_is_a_finding(repro, embed_library, tmp_path):
    """Flushes subnormal activations in place through a raw pointer, then computes correctly on
    them: it gets copies, and changing them is a finding of its own."""
    case = mxdiff.generate_case(7, 16, 128, [3, 0, 2], activations="subnormal", codes="normal", scales="normal")
    path = case.write(tmp_path / "subnormal.case")
    for mode in ("bits", "bound"):
        result = run(repro, embed_library, "flushes_in_place", tmp_path, case=path, MXDIFF_PYTHON_MODE=mode)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "route/ext-python/unexpected-error/python/inputs-modified" in result.stdout, result.stdout


def test_bound_mode_under_the_harness(repro, embed_library, tmp_path):
    ok = run(repro, embed_library, "reference", tmp_path, MXDIFF_PYTHON_MODE="bound")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = run(repro, embed_library, "wrong_scale", tmp_path, MXDIFF_PYTHON_MODE="bound")
    assert bad.returncode == 1 and "python/bound" in bad.stdout
    assert "route/ext-python/unexpected-error/python/bound" in bad.stdout, bad.stdout


def test_bound_check_is_not_repeated_for_fuzz_gemms_determinism_rerun(monkeypatch, tmp_path):
    """fuzz_gemm calls the kernel twice per case with the same inputs: where the second output is the
    first's, the bound check's answer is reused (it was computed twice per case, ~1 s each on a real
    decode shape); any change to what the answer depends on computes it again."""
    import numpy as np

    from mxdiff import embed
    case = mxdiff.generate_case(7, 64, 128, [0, 3, 0, 2, 0])  # empty groups among the routed ones
    a, codes, scales, offsets = (np.array(x) for x in (case.activations, case.codes, case.scales, case.row_offsets))
    reference = case.reference(transform="ordinary", model="exact")
    outputs = [reference]
    monkeypatch.setenv("MXDIFF_PYTHON_MODE", "bound")
    monkeypatch.setenv("MXDIFF_PYTHON_REPORTS", str(tmp_path))
    monkeypatch.setattr(embed, "_kernel", lambda *inputs: outputs[-1])
    monkeypatch.setattr(embed, "_settings", ())
    monkeypatch.setattr(embed, "_last_bound", None)
    monkeypatch.setattr(embed, "_stats", dict(embed._stats, bound_checks=0, bound_reused=0))

    def run(*inputs):
        return embed.run_case(*inputs, 0, 1, 32, 1)

    first = run(a, codes, scales, offsets)
    assert first[0] == 0
    assert np.array_equal(first[1], case.reference(transform="ordinary", model="sm90-emulated").view(np.uint16))
    again = run(a.copy(), codes.copy(), scales.copy(), offsets.copy())  # the rerun: same contents, new buffers
    assert again[0] == 0 and np.array_equal(again[1], first[1])
    assert (embed._stats["bound_checks"], embed._stats["bound_reused"]) == (1, 1)
    # An empty group's weights are read by no output element: the answer still holds.
    other = codes.copy()
    other[0] ^= 0x11
    assert run(a, other, scales, offsets)[0] == 0 and embed._stats["bound_checks"] == 1
    # A routed group's weights, a scale, an activation or the output changed: checked again.
    changed = [codes.copy(), scales.copy(), a.copy()]
    changed[0][1, 0, 0] ^= 0x11
    changed[1][3, 0, 0] ^= 1
    changed[2].view(np.uint16)[0, 0] ^= 1
    run(a, changed[0], scales, offsets)
    run(a, codes, changed[1], offsets)
    run(changed[2], codes, scales, offsets)
    assert embed._stats["bound_checks"] == 4
    wrong = reference.copy()
    wrong.view(np.uint16)[0, 0] ^= 0x0400  # an exponent bit: far outside the bound
    outputs.append(wrong)
    failed = run(a, codes, scales, offsets)
    assert failed[0] == 2 and failed[1].startswith("python/bound"), failed
    assert run(a, codes, scales, offsets) == failed and embed._stats["bound_checks"] == 5


def test_a_bound_finding_names_how_the_weights_deviate_from_the_mx_spec(monkeypatch, tmp_path):
    """A kernel that follows the OCP MX spec where the contract's ordinary transform flushes (raw
    scale 112: 2^-15 by the spec, 0 by the transform) fails the bound, and the finding says why in
    its first 120 characters (fuzz_gemm's finding keeps those) and in its full report."""
    import numpy as np

    from mxdiff import embed
    case = mxdiff.generate_case(3, 64, 128, [2, 1], codes="uniform")
    codes, offsets = np.array(case.codes), np.array(case.row_offsets)
    a = np.random.default_rng(3).uniform(-2, 2, size=np.shape(case.activations)).astype(np.float16)
    scales = np.full_like(np.array(case.scales), 112)

    def mx_spec_kernel(a, codes, scales, row_offsets):
        out = np.zeros((a.shape[0], codes.shape[1]), dtype=np.float16)
        for g in range(len(row_offsets) - 1):
            weights = (mxdiff.e2m1_decode(mxdiff.unpack_codes(codes[g])).astype(np.float64)
                       * mxdiff.e8m0_decode(np.repeat(scales[g], 32, axis=-1)))
            out[row_offsets[g]:row_offsets[g + 1]] = a[row_offsets[g]:row_offsets[g + 1]].astype(np.float64) @ weights.T
        return out

    monkeypatch.setenv("MXDIFF_PYTHON_MODE", "bound")
    monkeypatch.setenv("MXDIFF_PYTHON_REPORTS", str(tmp_path))
    monkeypatch.setattr(embed, "_kernel", mx_spec_kernel)
    monkeypatch.setattr(embed, "_settings", ())
    monkeypatch.setattr(embed, "_last_bound", None)
    status, message = embed.run_case(a, codes, scales, offsets, 0, 3, 32, 1)
    # The cause is in the kind, so fuzz_gemm's signature keeps it apart from other causes.
    assert status == 2 and message.startswith("python/bound/flushed-to-zero: "), message
    summary = message[len("python/bound/flushed-to-zero: "):].split(" (full report: ")[0]
    assert "weights vs the MX spec: " in summary and "flushed-to-zero" in summary, summary
    report = open(message.split("(full report: ")[1].rstrip(")")).read()
    assert "vs the MX spec under ordinary" in report and "scale bytes [112]" in report, report

    # On-spec weights (raw 127) and a NaN among the activations: the kernel that drops it is told apart.
    a[0, 5] = np.nan
    monkeypatch.setattr(embed, "_kernel", lambda a, codes, scales, row_offsets: np.nan_to_num(
        mx_spec_kernel(a, codes, scales, row_offsets)))
    status, message = embed.run_case(a, codes, np.full_like(scales, 127), offsets, 0, 3, 32, 1)
    assert status == 2 and message.startswith("python/specials/on-spec/nan-activations: "), message


def test_mx_spec_under_the_harness(repro, embed_library, tmp_path):
    """MXDIFF_PYTHON_TRANSFORM=mx-spec: the case (raw 112 scales) is judged against the MX spec's values,
    so the spec's kernel passes and the one with the SM70 flush is found, its signature naming the
    spec and where the element's scales lie, not an SM70 deviation; bits mode is refused at start."""
    spec = dict(MXDIFF_PYTHON_MODE="bound", MXDIFF_PYTHON_TRANSFORM="mx-spec")
    ok = run(repro, embed_library, "mx_spec", tmp_path, **spec)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    flushed = run(repro, embed_library, "mx_spec_flushed", tmp_path, **spec)
    assert flushed.returncode == 1, flushed.stdout + flushed.stderr
    assert "route/ext-python/unexpected-error/python/bound/mx-spec/below-fp16" in flushed.stdout, flushed.stdout
    assert ", spec value " in flushed.stdout and "flushed-to-zero" not in flushed.stdout, flushed.stdout
    # Without the variable the case's own contract (ordinary: raw 112 flushes) judges: the flush passes.
    assert run(repro, embed_library, "mx_spec_flushed", tmp_path, MXDIFF_PYTHON_MODE="bound").returncode == 0
    bits = run(repro, embed_library, "mx_spec", tmp_path, MXDIFF_PYTHON_TRANSFORM="mx-spec")
    assert bits.returncode != 0 and "python/init" in bits.stdout + bits.stderr, bits.stdout + bits.stderr
    assert "has no bits mode" in bits.stdout + bits.stderr
    unknown = run(repro, embed_library, "mx_spec", tmp_path, MXDIFF_PYTHON_MODE="bound", MXDIFF_PYTHON_TRANSFORM="spec")
    assert unknown.returncode != 0 and "MXDIFF_PYTHON_TRANSFORM='spec'" in unknown.stdout + unknown.stderr
