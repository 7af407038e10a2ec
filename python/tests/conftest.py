def pytest_addoption(parser):
    parser.addoption("--mxdiff-reference-bits", default=None,
                     help="the C++ helper mxdiff_reference_bits (tests/python/) the oracle test compares with")


pytest_plugins = ["pytester"]  # the plugin's own tests run pytest on a test file they write
