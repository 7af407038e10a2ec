#!/usr/bin/env python3
"""The planted-defect kit (tools/gpu/build_planted.sh, tools/gpu/run_planted.sh, fuzz/README.md:
"Planted kernel defects"), on the CPU:
- the four patches exist, apply to this tree (git apply --check) and touch only kernels/ (the code
  under test: the oracle is never planted), each inside one of the device-side kernel headers;
- run_planted.sh's plumbing with the example external kernel in place of the GPU kernels: the
  baseline (a libFuzzer build's fuzz_gemm) is clean, a "planted" fuzz_gemm whose kernel flips a bit
  (MXDIFF_EXAMPLE_KERNEL_FLIP=1, set by a wrapper) is found with its signature, time and
  executions, one that plants nothing is reported as not found, and the exit status says which.
  planted_kit_test.py REPO BUILD EXAMPLE_KERNEL (BUILD: a -DMXDIFF_FUZZING=ON build with fuzz/fuzz_gemm)
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO, BUILD, EXAMPLE_KERNEL = sys.argv[1:4]
del sys.argv[1:4]
PATCHES = {"splitk_order": "kernels/splitk_epilogue.cuh", "last_n_tile": "kernels/grouped_gemm_kernel.cuh",
           "experts_over_8": "kernels/grouped_gemm_kernel.cuh", "k_over_1024": "kernels/mainloop.cuh"}


def touched(patch):
    return sorted(set(re.findall(r"^\+\+\+ b/(\S+)$", open(patch).read(), re.M)))


class Patches(unittest.TestCase):
    def test_the_four_defects_apply_to_this_tree(self):
        found = {os.path.basename(p)[:-len(".patch")]: p
                 for p in glob.glob(os.path.join(REPO, "tools", "gpu", "planted", "*.patch"))}
        self.assertEqual(sorted(found), sorted(PATCHES))
        for name, patch in sorted(found.items()):
            with self.subTest(name=name):
                self.assertEqual(touched(patch), [PATCHES[name]])
                check = subprocess.run(["git", "-C", REPO, "apply", "--check", patch], capture_output=True, text=True)
                self.assertEqual(check.returncode, 0, f"{name}.patch does not apply: {check.stderr}")


def wrapper(path, flip):
    """A fuzz_gemm that is the build's, with the example kernel flipping a bit or not. The campaign
    takes a binary naming libFuzzer's flags (max_total_time, merge_control_file) for a libFuzzer
    build: so does this comment."""
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as script:
        script.write(f"#!/bin/sh\n# max_total_time merge_control_file\n"
                     f"{'export MXDIFF_EXAMPLE_KERNEL_FLIP=1' if flip else 'unset MXDIFF_EXAMPLE_KERNEL_FLIP'}\n"
                     f"exec {os.path.join(os.path.abspath(BUILD), 'fuzz', 'fuzz_gemm')} \"$@\"\n")
    os.chmod(path, 0o755)


class Runner(unittest.TestCase):
    def run_kit(self, planted, out, *names):
        env = dict(os.environ, OUT=out, MXDIFF_PLANTED_TIME="4",
                   MXDIFF_PLANTED_CAMPAIGN_ARGS=f"--external {EXAMPLE_KERNEL} --jobs 1")
        env.pop("MXDIFF_EXAMPLE_KERNEL_FLIP", None)
        return subprocess.run([os.path.join(REPO, "tools", "gpu", "run_planted.sh"), BUILD, planted, *names],
                              capture_output=True, text=True, env=env, timeout=300)

    def test_found_not_found_and_the_baseline(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        planted = os.path.join(tmp, "planted")
        wrapper(os.path.join(planted, "flips", "fuzz", "fuzz_gemm"), flip=True)
        wrapper(os.path.join(planted, "nothing", "fuzz", "fuzz_gemm"), flip=False)
        result = self.run_kit(planted, os.path.join(tmp, "out"))
        text = result.stdout + result.stderr
        self.assertEqual(result.returncode, 1, text)
        self.assertEqual(result.stderr, "")  # "nothing" was not found
        self.assertRegex(text, r"(?m)planted baseline: +no finding in 4 s \(\d+\.\d s wall\), executions (about )?\d+$")
        self.assertRegex(text, r"(?m)planted flips: +found in +\d+\.\d s, mismatch/\S+, executions (0 \(a known case, at start-up\)|"
                               r"\d+|about \d+)$")
        self.assertRegex(text, r"planted nothing: +no finding in 4 s")
        self.assertEqual(open(os.path.join(tmp, "out", "summary.txt")).read().count("planted "), 4)  # header too
        # Only the defect that is found: exit status 0.
        result = self.run_kit(planted, os.path.join(tmp, "out2"), "flips")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_bad_usage(self):
        result = subprocess.run([os.path.join(REPO, "tools", "gpu", "run_planted.sh"), BUILD], capture_output=True,
                                text=True)
        self.assertEqual(result.returncode, 2)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1)
        result = self.run_kit(BUILD, tempfile.mkdtemp(), "no-such-defect")
        self.assertEqual(result.returncode, 2)
        self.assertIn("no-such-defect", result.stderr)


if __name__ == "__main__":
    unittest.main()
