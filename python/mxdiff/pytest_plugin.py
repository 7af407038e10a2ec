"""pytest plugin of the mxdiff package (registered through the pytest11 entry point).

A test that takes the fixture `mxdiff_case` runs once per case: `--mxdiff-cases=N` generated
cases (seed `--mxdiff-seed`), then every GEMM case of the corpus folder `--mxdiff-corpus`
(or $MXDIFF_CORPUS: the repository's corpus/, its fuzz_gemm seeds and its regressions). Corpus
cases with more than `--mxdiff-max-weights` weight elements are listed as skipped, by name.
The fixture `mxdiff_check(kernel, case, **check_args)` fails the test with every finding; its
transform is `--mxdiff-transform` unless the test names one (mx-spec: the OCP MX spec's values, in
bound mode unless the test names a mode)."""
import os

import pytest

# Corpus folders and regression prefixes written in the GEMM case format.
_CASE_TARGETS = ("fuzz_gemm", "fuzz_reference", "fuzz_dispatch", "fuzz_transform")


def pytest_addoption(parser):
    from mxdiff import CHECK_TRANSFORMS
    group = parser.getgroup("mxdiff")
    group.addoption("--mxdiff-cases", type=int, default=8, help="generated mxdiff cases per test (default 8)")
    group.addoption("--mxdiff-seed", type=int, default=0, help="seed of the generated cases (default 0)")
    group.addoption("--mxdiff-corpus", default=os.environ.get("MXDIFF_CORPUS"),
                    help="mxdiff corpus folder to replay (its fuzz_gemm cases and regressions)")
    group.addoption("--mxdiff-transform", default="ordinary", choices=CHECK_TRANSFORMS,
                    help="the contract mxdiff_check judges against unless a test names one (default ordinary; "
                         "mx-spec: the OCP MX spec's element values, bound mode)")
    group.addoption("--mxdiff-max-weights", type=int, default=1 << 24,
                    help="corpus cases with more weight elements (groups x n x k) are skipped")


def corpus_files(root):
    """The case-format files of a corpus folder: its GEMM-format targets' seeds, its regressions."""
    files = []
    for target in _CASE_TARGETS:
        folder = os.path.join(root, target)
        if os.path.isdir(folder):
            files += sorted(os.path.join(folder, name) for name in os.listdir(folder))
    regressions = os.path.join(root, "regressions")
    if os.path.isdir(regressions):
        files += sorted(os.path.join(regressions, name) for name in os.listdir(regressions)
                        if name.split(".")[0] in _CASE_TARGETS)
    return files


def _corpus_params(config):
    import mxdiff
    root = config.getoption("--mxdiff-corpus")
    if not root:
        return []
    if not os.path.isdir(root):
        raise pytest.UsageError(f"--mxdiff-corpus: {root} is not a folder")
    limit = config.getoption("--mxdiff-max-weights")
    params = []
    for path in corpus_files(root):
        name = os.path.relpath(path, root)
        data = mxdiff.read_case_bytes(path)  # repro's rule: no FIFO, nothing larger than a case
        groups, n, k, _ = mxdiff._core.case_shape(data)
        if groups * n * k > limit:
            params.append(pytest.param(None, id=name, marks=pytest.mark.skip(
                reason=f"{name}: {groups} x {n} x {k} weights, more than --mxdiff-max-weights={limit}")))
        else:
            params.append(pytest.param(mxdiff.decode_case(data, path), id=name))
    return params


def pytest_generate_tests(metafunc):
    if "mxdiff_case" not in metafunc.fixturenames:
        return
    import mxdiff
    config = metafunc.config
    seed = config.getoption("--mxdiff-seed")
    generated = mxdiff.generate_cases(config.getoption("--mxdiff-cases"), seed)
    params = [pytest.param(case, id=f"seed{seed}-{i}-{case.groups}x{case.n}x{case.k}")
              for i, case in enumerate(generated)]
    metafunc.parametrize("mxdiff_case", params + _corpus_params(config))


@pytest.fixture
def mxdiff_check(tmp_path, request):
    """mxdiff_check(kernel, case_or_cases, **check_args): mxdiff.check, failing the test with
    every finding (its .case file under the test's tmp_path); transform defaults to
    --mxdiff-transform, and under mx-spec mode to bound."""
    import mxdiff
    transform = request.config.getoption("--mxdiff-transform")

    def run(kernel, cases, **kwargs):
        if isinstance(cases, mxdiff.Case):
            cases = [cases]
        kwargs.setdefault("out_dir", str(tmp_path / "findings"))
        kwargs.setdefault("transform", transform)
        if kwargs["transform"] == mxdiff.MX_SPEC:
            kwargs.setdefault("mode", "bound")
        findings = mxdiff.check(kernel, cases, **kwargs)
        if findings:
            pytest.fail("\n".join(str(f) for f in findings), pytrace=False)
        return findings

    return run
