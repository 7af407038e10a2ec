"""python/embed/ (libmxdiff_python_kernel.so) under the real harness: repro loads it as fuzz_gemm
does (--external) and runs fuzz_gemm's checks on a corpus case with Python kernels."""
import os
import subprocess
import sys

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


def run(repro, library, function, tmp_path, **env):
    site = os.path.dirname(os.path.dirname(os.path.abspath(mxdiff.__file__)))
    environment = dict(os.environ, MXDIFF_PYTHON=f"example_kernels:{function}",
                       MXDIFF_PYTHON_PATH=os.pathsep.join([EMBED, site]), MXDIFF_PYTHON_REPORTS=str(tmp_path),
                       MXDIFF_PYTHON_EXECUTABLE=sys.executable, **env)
    return subprocess.run([repro, CASE, f"--external={library}"], capture_output=True, text=True, env=environment,
                          timeout=120)


def test_a_correct_python_kernel_passes_fuzz_gemms_checks(repro, embed_library, tmp_path):
    result = run(repro, embed_library, "reference", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ext-python" in result.stdout


@pytest.mark.parametrize("function, kind", [("wrong_scale", "mismatch/ext-python"), ("raises", "python/raised"),
                                            ("wrong_shape", "python/shape"), ("hangs", "python/timeout")])
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
        if kind == "python/raised":
            assert "Traceback" in text and "this kernel always fails" in text


def test_bound_mode_under_the_harness(repro, embed_library, tmp_path):
    ok = run(repro, embed_library, "reference", tmp_path, MXDIFF_PYTHON_MODE="bound")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = run(repro, embed_library, "wrong_scale", tmp_path, MXDIFF_PYTHON_MODE="bound")
    assert bad.returncode == 1 and "python/bound" in bad.stdout
    assert "route/ext-python/unexpected-error/python/bound" in bad.stdout, bad.stdout
