#!/usr/bin/env python3
"""The campaign's own contract (tools/campaign/campaign, ./run's argument handling): the bounds of
its numeric arguments, what it says about an --external that cannot be a kernel library, one-line
usage errors, where libFuzzer's artifacts go, how long a campaign may run past --time, and the
README's build paths. Table-driven like tests/tools/cli/cli_contract_test.py: each case runs one
command under its own time limit and asserts exit status, what the output says and never says, and
an optional check afterwards. Run by ctest (campaign_contract, tests/tools/campaign/CMakeLists.txt);
by hand:

  python3 tests/tools/campaign/campaign_test.py --repo . --build build-fuzz --fuzzing 1 \\
      --example-kernel build-fuzz/fuzz/libmxdiff_example_kernel.so \\
      --slow-kernel build-fuzz/tests/tools/campaign/libmxdiff_campaign_slow_kernel.so \\
      --hostile-kernel build-fuzz/tests/tools/campaign/libmxdiff_hostile_kernel.so [-k SUBSTRING]

Cases that need real libFuzzer binaries run only with --fuzzing 1 (the libFuzzer build's ctest).
"""
import glob
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import contract_cases  # noqa: E402  (tests/tools/contract_cases.py: Case, run_cases, write, fake_fuzzer)
from contract_cases import fake_fuzzer, write  # noqa: E402

NEVER = [r"Traceback \(most recent call last\)", r"terminate called", r"AddressSanitizer"]


class Case(contract_cases.Case):
    """A case of this test: 60 s unless told, never the patterns in NEVER, and a check that is
    called with the output and the run's seconds."""

    def __init__(self, name, argv, status, says=(), never=(), timeout=60, **kwargs):
        super().__init__(name, argv, status, says, list(never) + NEVER, timeout, **kwargs)

    def checked(self, output, seconds):
        return self.check(output, seconds)


def cores():
    return len(os.sched_getaffinity(0)) or 1


def build_cases(opt, tmp):
    repo, build = opt.repo, opt.build
    campaign = [sys.executable, os.path.join(repo, "tools", "campaign", "campaign")]
    out = os.path.join(tmp, "out")
    limit = 4 * cores()
    cases = []

    # --- item 6: every numeric argument has a documented maximum, checked before anything starts.
    huge = "99999999999999999999"
    cases += [
        Case("--time past 7 days", campaign + ["--check-args", f"--time={huge}"], 2,
             [r"argument --time: must be at most 604800 \(7 days\), got 99999999999999999999"]),
        Case("--time at 7 days", campaign + ["--check-args", "--time=604800"], 0, [r"arguments ok"]),
        Case("--time one past 7 days", campaign + ["--check-args", "--time=604801"], 2, [r"must be at most 604800"]),
        Case("--jobs=5000", campaign + ["--check-args", "--jobs=5000"], 2,
             [rf"argument --jobs: must be at most {limit} \(4 per core, {cores()} core\(s\)\), got 5000"]),
        Case("--jobs huge", campaign + ["--check-args", f"--jobs={huge}"], 2, [rf"must be at most {limit}"]),
        Case("--jobs at the bound", campaign + ["--check-args", f"--jobs={limit}"], 0, [r"arguments ok"]),
        Case("--jobs one past the bound", campaign + ["--check-args", f"--jobs={limit + 1}"], 2,
             [rf"must be at most {limit}"]),
        Case("--gpu-workers huge", campaign + ["--check-args", f"--gpu-workers={huge}"], 2,
             [r"argument --gpu-workers: must be at most 64"]),
        Case("--workers-per-gpu huge", campaign + ["--check-args", f"--workers-per-gpu={huge}"], 2,
             [rf"argument --workers-per-gpu: must be at most {limit}"]),
        Case("--progress huge", campaign + ["--check-args", f"--progress={huge}"], 2,
             [r"argument --progress: must be at most 3600"]),
        Case("--progress 0 is allowed", campaign + ["--check-args", "--progress=0"], 0, [r"arguments ok"]),
    ]

    # --- item 7: an --external that exists but cannot be a kernel library says what it is.
    library_dir = os.path.join(tmp, "a-folder.so")
    os.makedirs(library_dir)
    fifo = os.path.join(tmp, "a-fifo.so")
    os.mkfifo(fifo)
    text = write(os.path.join(tmp, "text.so"), b"not an ELF file\n")
    unreadable = write(os.path.join(tmp, "unreadable.so"), open(opt.example_kernel, "rb").read()
                       if os.path.exists(opt.example_kernel) else b"\x7fELF", 0o000)
    gemm = ["--check-args", "--targets", "fuzz_gemm", "--external"]
    cases += [
        Case("--external DIR", campaign + gemm + [library_dir], 2,
             [r"--external .*a-folder\.so: is a directory, not a shared library"], [r"no such file"]),
        Case("--external /dev/zero", campaign + gemm + ["/dev/zero"], 2,
             [r"--external /dev/zero: is a character device, not a regular file"], [r"no such file"]),
        Case("--external FIFO does not block", campaign + gemm + [fifo], 2,
             [r"--external .*a-fifo\.so: is a FIFO, not a regular file"], timeout=20),
        Case("--external of a text file", campaign + gemm + [text], 2,
             [r"--external .*text\.so: not a shared library \(it does not start with the ELF magic"]),
        Case("--external of an ELF executable", campaign + gemm + [sys.executable], 2,
             [r"not a shared library \(an ELF file, but an executable\)"]) if elf_type(sys.executable) == 2 else None,
        Case("--external of an unreadable file", campaign + gemm + [unreadable], 2,
             [r"--external .*unreadable\.so: not readable \(permission denied\)"]) if os.geteuid() != 0 else None,
        Case("--external of a missing file", campaign + gemm + [os.path.join(tmp, "missing.so")], 2,
             [r"--external .*missing\.so: no such file"]),
        Case("--external of a real library", campaign + gemm + [opt.example_kernel], 0, [r"arguments ok"]),
        # --python (issue 20): MODULE:FUNCTION, not beside --external, needs fuzz_gemm.
        Case("--python without a function", campaign + ["--check-args", "--targets", "fuzz_gemm", "--python", "mod"], 2,
             [r"--python mod: expected MODULE:FUNCTION"]),
        Case("--python and --external", campaign + ["--check-args", "--targets", "fuzz_gemm", "--python", "m:f",
                                                     "--external", opt.example_kernel], 2, [r"give one"]),
        Case("--python without fuzz_gemm", campaign + ["--check-args", "--targets", "fuzz_reference", "--python",
                                                       "m:f"], 2, [r"--python is fuzzed by fuzz_gemm"]),
        Case("--python m:f", campaign + ["--check-args", "--targets", "fuzz_gemm", "--python", "pkg.mod:fn"], 0,
             [r"arguments ok"]),
    ]

    # --- item 9: a usage error is one line; ./run's are run's.
    def one_line(output, _seconds):
        lines = [line for line in output.splitlines() if line.strip()]
        return None if len(lines) == 1 else f"{len(lines)} lines, expected one"
    run_job = [os.path.join(repo, "run")]
    cases += [
        Case("an unknown argument is one line", campaign + ["--bogus"], 2,
             [r"^campaign: unrecognized arguments: --bogus \(campaign --help lists the arguments\)$"], [r"usage:"],
             check=one_line),
        Case("a missing value is one line", campaign + ["--time"], 2,
             [r"^campaign: argument --time: expected one argument"], [r"usage:"], check=one_line),
        Case("a bad value is one line", campaign + ["--jobs", "x"], 2,
             [r"^campaign: argument --jobs: 'x' is not a whole number"], [r"usage:"], check=one_line),
        Case("--help keeps the usage", campaign + ["--help"], 0, [r"^usage: campaign", r"--time TIME"]),
        Case("./run --bogus is run's error, in one line", run_job + ["--bogus"], 2,
             [r"^run: unrecognized arguments: --bogus \(\./run --help lists the arguments\)$"],
             [r"usage:", r"^campaign:"], check=one_line, timeout=120),
        Case("./run --jobs 0 is run's error", run_job + ["--jobs", "0"], 2,
             [r"^run: argument --jobs: must be at least 1, got 0"], [r"^campaign:"], check=one_line, timeout=120),
        Case("./run --targets bogus is run's error", run_job + ["--targets", "bogus"], 2,
             [r"^run: unknown targets bogus"], [r"^campaign:"], check=one_line, timeout=120),
    ]

    # --- item 23: every libFuzzer invocation (the workers and the merge) writes its artifacts under
    # --out, whatever the working directory. The fake target does what libFuzzer does: it writes
    # at -artifact_prefix, which is the working directory when the flag is missing (a worker writes
    # its slowest input, which is no finding; the merge an input that crashed it).
    fake = os.path.join(tmp, "fake-build")
    os.makedirs(os.path.join(fake, "fuzz"))
    fake_fuzzer(os.path.join(fake, "fuzz", "fuzz_dispatch"), """
prefix=""; merge=0
for arg in "$@"; do
  case "$arg" in -artifact_prefix=*) prefix="${arg#-artifact_prefix=}" ;; -merge=1) merge=1 ;; esac
done
if [ "$merge" = 1 ]; then
  echo x > "${prefix}crash-fakemerge"; echo "Test unit written to ${prefix}crash-fakemerge" >&2; exit 0
fi
echo x > "${prefix}slow-unit-fakeworker"; echo "Test unit written to ${prefix}slow-unit-fakeworker" >&2
printf '#2\tINITED cov: 10 ft: 10 corp: 1/1b exec/s: 0 rss: 30Mb\n' >&2
echo "stat::number_of_executed_units: 50" >&2; exit 0""")
    scratch = os.path.join(tmp, "scratch-cwd")
    os.makedirs(scratch)
    fake_out = os.path.join(tmp, "fake-out")

    def nothing_in(folder, also=None):
        def check(_output, _seconds):
            left = os.listdir(folder)
            if left:
                return f"the working directory {folder} holds {', '.join(sorted(left))}"
            return also() if also else None
        return check

    def artifacts_under_out():
        found = [name for _, _, files in os.walk(fake_out) for name in files]
        missing = [name for name in ("merge-crash-fakemerge",) if name not in found]
        worker = [name for name in found if name.endswith("slow-unit-fakeworker")]
        return (f"no {', '.join(missing)} under --out" if missing else
                None if worker else "no worker artifact under --out")
    cases += [
        Case("artifacts of the workers and the merge go under --out, not the working directory",
             campaign + ["--build-dir", fake, "--targets", "fuzz_dispatch", "--jobs", "1", "--time", "1",
                         "--out", fake_out, "--progress", "0"], 0, [r"fuzz_dispatch\s+1\s.*\bok$"],
             cwd=scratch, check=nothing_in(scratch, artifacts_under_out)),
    ]
    if opt.fuzzing:
        real_scratch = os.path.join(tmp, "scratch-cwd-real")
        os.makedirs(real_scratch)
        # The slow kernel aborts on every call after its 50th: past fuzz_gemm's start-up (the known
        # cases, each run twice: the determinism check), so the worker crashes on a corpus input and so
        # does every merge process.
        cases.append(Case("a real campaign whose merge crashes leaves nothing in the working directory",
                          campaign + ["--build-dir", build, "--targets", "fuzz_gemm", "--external", opt.slow_kernel,
                                      "--jobs", "1", "--time", "3", "--out", out, "--progress", "0"], 1,
                          [r"sanitizer/libFuzzer/deadly", r"fuzz_gemm: \d+ input\(s\) crashed the merge \(left out of "
                           r"the corpus\), kept as \S+/merge-crash-\*"], env={"MXDIFF_SLOW_KERNEL_ABORT_AFTER": "50"},
                          cwd=real_scratch, check=nothing_in(real_scratch), timeout=300))

    # --- issue 19, item c: fuzz_gemm's stats files (one per worker) are reported per worker and in
    # total, with the executions per interval; --cpu-check-every reaches every worker.
    stats_build = os.path.join(tmp, "stats-build")
    os.makedirs(os.path.join(stats_build, "fuzz"))
    fake_fuzzer(os.path.join(stats_build, "fuzz", "fuzz_gemm"), """
every=missing
for arg in "$@"; do case "$arg" in -merge=1) exit 0 ;; --cpu-check-every=*) every="${arg#--cpu-check-every=}" ;; esac
done
printf 'cases 40\\nsmall 10\\ndecode 20\\nhuge 10\\nelements 123456\\ncpu 12\\ndevice 28\\ncpu_checked %s\\n'\\
'fallbacks 1\\nrefused 0\\ndisagreements 0\\nruns_refused 0\\ndevice_oracle 1\\nseconds 2.0\\n' "$every" > "$MXDIFF_STATS_FILE"
printf '#2\\tINITED cov: 10 ft: 10 corp: 1/1b exec/s: 0 rss: 30Mb\\n' >&2
echo 'stat::number_of_executed_units: 40' >&2; sleep 2; exit 0""")
    cases.append(Case("fuzz_gemm's stats are reported per worker and in total; --cpu-check-every reaches the workers",
                      campaign + ["--build-dir", stats_build, "--targets", "fuzz_gemm", "--external", opt.example_kernel,
                                  "--jobs", "2", "--time", "2", "--out", out, "--progress", "0", "--interval", "1",
                                  "--cpu-check-every", "7"], 0,
                      [r"^fuzz_gemm: what was compared \(the workers' stats files\)$",
                       r"^\s+total\s+80\s+20\s+40\s+20\s+246912\s+\S+/s\s+24\s+56\s+14\s+2\s+0\s+0$",
                       r"checked on the CPU: 38 case\(s\) \(24 judged on the CPU reference, 14 device-judged cases",
                       r"device reference in 2 of 2 worker\(s\)$",
                       r"^fuzz_gemm: executions per 1 s interval: 0-1 s ", r"^fuzz_gemm: sustained over the last \d+ s: "],
                      [r"missing"]))
    cases += [
        Case("--cpu-check-every past its bound", campaign + ["--check-args", "--cpu-check-every=1000001"], 2,
             [r"argument --cpu-check-every: must be at most 1000000, got 1000001"]),
        Case("--cpu-check-every 0 (no device reference)", campaign + ["--check-args", "--cpu-check-every=0"], 0,
             [r"arguments ok"]),
        Case("--interval 0", campaign + ["--check-args", "--interval=0"], 2, [r"argument --interval: must be at least 1"]),
    ]

    # --- item 8: the wall time. A worker past --time is stopped (SIGABRT: libFuzzer writes the input
    # it is in; SIGKILL 5 s later if that did not end it), its input kept; the merge has a limit of
    # its own (30 s here) and its new inputs stay in out/ when it runs out. The bound: --time + 10 +
    # 5 + 30 s, and a few seconds for the campaign itself.
    slow_build = os.path.join(tmp, "slow-build")
    os.makedirs(os.path.join(slow_build, "fuzz"))
    first = os.path.join(tmp, "slow-first-worker")
    fake_fuzzer(os.path.join(slow_build, "fuzz", "fuzz_transform"), f"""
prefix=""; merge=0; new=""
for arg in "$@"; do
  case "$arg" in -artifact_prefix=*) prefix="${{arg#-artifact_prefix=}}" ;; -merge=1) merge=1 ;;
    -*) ;; *) [ -z "$new" ] && new="$arg" ;; esac
done
[ "$merge" = 1 ] && exec sleep 1000  # a merge that never ends
printf '#2\tINITED cov: 10 ft: 10 corp: 1/1b exec/s: 0 rss: 30Mb\n' >&2
printf '#100\tNEW    cov: 11 ft: 12 corp: 2/2b exec/s: 50 rss: 30Mb\n' >&2
echo "input of $$" > "$new/new-input-$$"
if mkdir {first} 2>/dev/null; then  # libFuzzer's SIGABRT handler: write the current input, exit
  sleep 1000 & child=$!
  trap 'echo big > "${{prefix}}crash-fakeslow"; echo "==1== ERROR: libFuzzer: deadly signal" >&2
        echo "SUMMARY: libFuzzer: deadly signal" >&2; echo "Test unit written to ${{prefix}}crash-fakeslow" >&2
        kill $child; exit 1' ABRT
  wait $child
else  # a worker that does not answer SIGABRT
  trap '' ABRT; exec sleep 1000
fi""")
    slow_out = os.path.join(tmp, "slow-out")
    bound = 1 + 10 + 5 + 30

    def within(seconds_allowed, extra=None):
        def check(output, seconds):
            if seconds > seconds_allowed:
                return f"took {seconds:.0f} s, more than {seconds_allowed} s"
            kept = re.search(r"the input it was running: (\S+)", output)
            if kept and not os.path.isfile(kept.group(1)):
                return f"{kept.group(1)} does not exist"
            return extra(output) if extra else None
        return check

    def unmerged_kept(output):
        folder = re.search(r"new input\(s\) are kept unmerged in ([^\s;]+)", output)
        if not folder or not os.path.isdir(folder.group(1)):
            return "no folder of unmerged inputs named"
        return None if any(f.startswith("new-input-") for f in os.listdir(folder.group(1))) else \
            f"{folder.group(1)} lost the new inputs"
    cases += [
        Case("workers past --time are stopped and the merge is bounded",
             campaign + ["--build-dir", slow_build, "--targets", "fuzz_transform", "--jobs", "2", "--time", "1",
                         "--out", slow_out, "--progress", "0"], 0,
             [r"fuzz_transform worker [01] was still running 10 s past --time: stopped \(SIGABRT\); the input it "
              r"was running: \S+/stopped-w[01]-fakeslow$",
              r"fuzz_transform worker [01] was still running 10 s past --time: stopped \(SIGABRT, then SIGKILL 5 s "
              r"later\); it wrote no input",
              r"fuzz_transform: merge ran out of its 30 s limit and was stopped; the 2 new input\(s\) are kept "
              r"unmerged in \S+/new; to add those that add coverage to corpus/fuzz_transform/ by hand: "
              r"ASAN_OPTIONS=protect_shadow_gap=0 \S+/fuzz_transform -merge=1 -use_counters=0 \S+/corpus/fuzz_transform "
              r"\S+/new$",
              r"fuzz_transform\s+2\s.*\s\d+ -> \?\s+0\s+ok \(2 worker\(s\) stopped at the time limit\)$"],
             [r"sanitizer/libFuzzer/deadly", r"did not fuzz"], timeout=bound + 60,
             check=within(bound + 8, unmerged_kept)),
    ]
    if opt.fuzzing:
        real_bound = 5 + 10 + 5 + 30
        real_out = os.path.join(tmp, "slow-real-out")
        flag = os.path.join(tmp, "slow-kernel-now")

        def slow_once_fuzzing():
            """Creates the slow kernel's flag file once the worker's log says INITED (it fuzzes)."""
            def watch():
                deadline = time.time() + 200
                while time.time() < deadline:
                    for log in glob.glob(os.path.join(real_out, "*", "fuzz_gemm", "worker0.log")):
                        if re.search(r"^#\d+\s+INITED", open(log, errors="replace").read(), re.M):
                            open(flag, "w").close()
                            return
                    time.sleep(0.1)
            threading.Thread(target=watch, daemon=True).start()
        cases.append(Case("a real worker stuck in an input past --time is stopped, its input kept",
                          campaign + ["--build-dir", build, "--targets", "fuzz_gemm", "--external", opt.slow_kernel,
                                      "--jobs", "1", "--time", "5", "--out", real_out, "--progress", "0"], 0,
                          [r"fuzz_gemm worker 0 was still running 10 s past --time: stopped \(SIGABRT\); the input "
                           r"it was running: \S+/stopped-w0-\w+$", r"merge ran out of its 30 s limit"],
                          [r"sanitizer/libFuzzer/deadly", r"did not fuzz"], env={"MXDIFF_SLOW_KERNEL_WHEN": flag},
                          before=slow_once_fuzzing, timeout=real_bound + 60, check=within(real_bound + 15)))

    # --- item 18: the verdict is the last line (run's under ./run), and the table is explained.
    verdict_build = os.path.join(tmp, "verdict-build")
    os.makedirs(os.path.join(verdict_build, "fuzz"))
    fuzzed = ("printf '#2\\tINITED cov: 10 ft: 10 corp: 1/1b exec/s: 0 rss: 30Mb\\n' >&2\n"
              "echo 'stat::number_of_executed_units: 50' >&2\n")
    fake_fuzzer(os.path.join(verdict_build, "fuzz", "fuzz_dispatch"), fuzzed + "exit 0")
    fake_fuzzer(os.path.join(verdict_build, "fuzz", "fuzz_reference"), """
for arg in "$@"; do case "$arg" in -artifact_prefix=*) prefix="${arg#-artifact_prefix=}" ;; -merge=1) exit 0 ;; esac
done
""" + fuzzed + """echo x > "${prefix}crash-fake"; echo "SUMMARY: libFuzzer: deadly signal" >&2
echo "Test unit written to ${prefix}crash-fake" >&2; exit 1""")
    fake_fuzzer(os.path.join(verdict_build, "fuzz", "fuzz_transform"), "echo 'fuzz_transform: cannot start' >&2; exit 2")
    verdict_out = os.path.join(tmp, "verdict-out")
    quick = ["--build-dir", verdict_build, "--jobs", "1", "--time", "1", "--out", verdict_out, "--progress", "0"]

    def last_line(pattern):
        def check(output, _seconds):
            lines = [line for line in output.splitlines() if line.strip()]
            return None if lines and re.fullmatch(pattern, lines[-1]) else \
                f"the last line is {lines[-1] if lines else 'missing'!r}, not /{pattern}/"
        return check
    legend = [r"^  execs/s: execs / time s; sum of worker exec/s: ", r"cov: code edges reached, ft: features",
              r"corpus: files in corpus/<target>/ -> files after merging"]
    cases += [
        Case("a clean campaign ends with its verdict", campaign + quick + ["--targets", "fuzz_dispatch"], 0, legend,
             check=last_line(r"campaign: clean: 1 target\(s\) fuzzed for 1 s each, no findings")),
        Case("under ./run the verdict is run's", campaign + quick + ["--targets", "fuzz_dispatch"], 0,
             env={"MXDIFF_CAMPAIGN_NAME": "run"},
             check=last_line(r"run: clean: 1 target\(s\) fuzzed for 1 s each, no findings")),
        Case("findings end with a FINDINGS verdict", campaign + quick + ["--targets", "fuzz_reference"], 1,
             check=last_line(r"campaign: FINDINGS: 1 signature\(s\) in fuzz_reference \(1\), listed above with "
                             r"their repro commands \(exit 1\)")),
        Case("a worker that did not fuzz ends with NOT FUZZED", campaign + quick + ["--targets",
                                                                                 "fuzz_transform,fuzz_reference"], 3,
             check=last_line(r"campaign: NOT FUZZED: 1 worker\(s\) did not fuzz, named above; findings in "
                             r"fuzz_reference \(1\) \(exit 3\)")),
    ]

    # --- --keep-going: the workers get MXDIFF_KEEP_GOING=1, fuzz to the end, and the inputs each
    # signature was found by are added up over them. The fake worker writes one finding and the
    # driver's count lines (fuzz/driver/findings.h: the last is the largest), and beside them a file
    # that is not a finding (a Python kernel's report), but only when it is told to keep going.
    going_build = os.path.join(tmp, "going-build")
    os.makedirs(os.path.join(going_build, "fuzz"))
    fake_fuzzer(os.path.join(going_build, "fuzz", "fuzz_dispatch"), """
for arg in "$@"; do case "$arg" in -merge=1) exit 0 ;; esac; done
""" + fuzzed + """[ "$MXDIFF_KEEP_GOING" = 1 ] || exit 0
mkdir -p "$MXDIFF_FINDINGS_DIR"
echo x > "$MXDIFF_FINDINGS_DIR/fuzz_dispatch.mismatch_x.$$.case"
echo "signature: mismatch/x" > "$MXDIFF_FINDINGS_DIR/fuzz_dispatch.mismatch_x.$$.txt"
echo "not a finding" > "$MXDIFF_FINDINGS_DIR/python.bound.report.txt"
echo "==mxdiff== kept going: 4 input(s) found mismatch/x" >&2
echo "==mxdiff== kept going: 7 input(s) found mismatch/x" >&2; exit 0""")
    going = ["--build-dir", going_build, "--targets", "fuzz_dispatch", "--jobs", "2", "--time", "1",
             "--out", os.path.join(tmp, "going-out"), "--progress", "0"]
    cases += [
        Case("--keep-going: workers fuzz on and each signature's inputs are summed", campaign + going + ["--keep-going"],
             1, [r"fuzz_dispatch\s+2\s.*\b1 finding\(s\)$", r"FINDINGS: 1 signature\(s\)",
                 r"^  mismatch/x\n    \S*repro \S+/fuzz_dispatch\.mismatch_x\.\d+\.case   \(14 input\(s\) found it\)   "
                 r"\(2 inputs kept: \S+/findings/\*\.case\)$"],
             [r"did not fuzz"]),
        Case("without --keep-going the workers are not told to", campaign + going, 0, [r"no findings"]),
    ]

    # A build that goes away while the workers run (rebuilt, or a copy removed): the merge cannot
    # start, and the report is printed all the same, saying so.
    gone_build = os.path.join(tmp, "gone-build")
    os.makedirs(os.path.join(gone_build, "fuzz"))
    fake_fuzzer(os.path.join(gone_build, "fuzz", "fuzz_dispatch"), fuzzed + 'rm -f "$0"; exit 0')
    cases.append(Case("a binary removed during the run: the merge says so and the report is printed",
                      campaign + ["--build-dir", gone_build, "--targets", "fuzz_dispatch", "--jobs", "1", "--time", "1",
                                  "--out", os.path.join(tmp, "gone-out"), "--progress", "0"], 0,
                      [r"fuzz_dispatch: merge could not start \(No such file or directory: \S+/fuzz_dispatch\)",
                       r"campaign: clean: 1 target"]))

    # --- items 17 and 18: ./run's steps are not in ninja's [n/N] notation and its campaign speaks as
    # run; every build path the READMEs name is a target of that build, and the paths of the
    # README's "After ./run" block are targets ./run builds (checked on the text of ./run: running
    # it builds everything, far too slow for a test).
    def run_script_check(_output, _seconds):
        text = open(os.path.join(repo, "run")).read()
        steps = re.findall(r'^say "([^"]*)', text, re.M)
        problems = [f"./run step {step!r} is not 'step N of 4: ...'" for step in steps
                    if not re.match(r"step [1-4] of 4: ", step)]
        if len(steps) != 4:
            problems.append(f"./run announces {len(steps)} steps, not 4")
        if not re.search(r"^MXDIFF_CAMPAIGN_NAME=run exec python3 tools/campaign/campaign ", text, re.M):
            problems.append("./run does not run the campaign as run (MXDIFF_CAMPAIGN_NAME=run)")
        return "; ".join(problems) or None
    cases.append(Case("./run names its steps apart from ninja's and ends with run's verdict", ["true"], 0,
                      check=run_script_check))

    def readme_paths_check(_output, _seconds):
        prefix = "build-fuzz" if opt.fuzzing else "build"
        listing = subprocess.run(["ninja", "-C", build, "-t", "targets", "all"], capture_output=True, text=True)
        if listing.returncode != 0:
            return f"ninja -C {build} -t targets all failed: {listing.stderr.strip()}"
        outputs = {line.split(":", 1)[0] for line in listing.stdout.splitlines()}
        problems = []
        path_re = re.compile(r"(?<![\w/.-])(build(?:-fuzz)?)/([\w.+/-]*\w)")
        for readme in ("README.md", os.path.join("fuzz", "README.md"), os.path.join("tools", "README.md")):
            text = open(os.path.join(repo, readme)).read()
            for match in path_re.finditer(text):
                if match.group(1) == prefix and "<" not in text[match.end():match.end() + 2] \
                        and match.group(2) not in outputs:
                    problems.append(f"{readme} names {match.group(0)}, which {prefix}/ does not build")
        # The README's block of paths that exist after ./run: each is a target ./run builds.
        text = open(os.path.join(repo, "README.md")).read()
        block = re.search(r"^After `\./run`.*?(?=^After `\./test`)", text, re.M | re.S)
        if not block:
            return "; ".join(problems + ["README.md has no 'After `./run`' block before 'After `./test`'"])
        run_text = open(os.path.join(repo, "run")).read()
        built = {"build": re.findall(r'cmake --build "\$build_dir" [^\n]*--target (.*?)(?: \|\||$)', run_text, re.M),
                 "build-fuzz": re.findall(r'cmake --build "\$fuzz_build_dir" [^\n]*--target (.*?)(?: \|\||$)',
                                          run_text, re.M)}
        built = {key: " ".join(value).split() for key, value in built.items()}
        for match in path_re.finditer(block.group(0)):
            name = os.path.basename(match.group(2))
            name = re.sub(r"^lib(.*)\.so$", r"\1", name)
            targets = built[match.group(1)]
            if name not in targets and not (name.startswith("fuzz_") and "$targets" in targets):
                problems.append(f"README.md's After ./run block names {match.group(0)}, which ./run does not build "
                                f"(it builds {' '.join(targets)} in {match.group(1)}/)")
        return "; ".join(problems) or None
    cases.append(Case("the READMEs' build paths are targets of their build, and ./run builds those it promises",
                      ["true"], 0, check=readme_paths_check))

    # --- MXDIFF_REQUIRE_GPU (fuzz/README.md): where nvidia-smi lists a GPU, the campaign's GPU
    # workers get MXDIFF_REQUIRE_GPU=1, so one that cannot use it stops instead of fuzzing its CPU
    # side. A fake nvidia-smi lists one GPU; the fake fuzz_layer reports what it was given.
    fake_bin = os.path.join(tmp, "fake-nvidia-bin")
    os.makedirs(fake_bin)
    write(os.path.join(fake_bin, "nvidia-smi"), b"#!/bin/sh\necho 'GPU 0: Fake GPU (UUID: GPU-0)'\n", 0o755)
    gpu_build = os.path.join(tmp, "gpu-build")
    os.makedirs(os.path.join(gpu_build, "fuzz"))
    fake_fuzzer(os.path.join(gpu_build, "fuzz", "fuzz_layer"), """
if [ "$MXDIFF_REQUIRE_GPU" = 1 ]; then
  echo "fuzz_layer: MXDIFF_REQUIRE_GPU=1 (a GPU is present) but no device, not fuzzing: fake" >&2; exit 2
fi
echo "fuzz_layer: no device (fake): checking the CPU side only" >&2
printf '#2\\tINITED cov: 10 ft: 10 corp: 1/1b exec/s: 0 rss: 30Mb\\n' >&2
echo 'stat::number_of_executed_units: 50' >&2; exit 0""")
    with_gpu = {"PATH": fake_bin + os.pathsep + os.environ.get("PATH", "")}
    # --no-mps here and below where PATH keeps the machine's own: a GPU machine's real MPS daemon stays out.
    cases.append(Case("a GPU target that cannot use a listed GPU fails the campaign",
                      campaign + ["--build-dir", gpu_build, "--targets", "fuzz_layer", "--time", "1", "--out", out,
                                  "--progress", "0", "--no-mps"], 3,
                      [r"fuzz_layer worker 0 \(GPU 0\) did not fuzz: stopped before fuzzing \(exit 2\): fuzz_layer: "
                       r"MXDIFF_REQUIRE_GPU=1 \(a GPU is present\)"], env=with_gpu))
    # Placement (issue 21): the caller's CUDA_VISIBLE_DEVICES is kept, in turn per worker; nvidia-smi
    # lists four GPUs whatever it says. The fake target stops and names the GPU it was given, and
    # whether libFuzzer's leak checks are off (GPU workers only). The fake MPS control daemon (below)
    # logs its calls to FAKE_MPS_CALLS.
    four_bin = os.path.join(tmp, "fake-nvidia-four")
    os.makedirs(four_bin)
    list_four = b"#!/bin/sh\nfor i in 0 1 2 3; do echo \"GPU $i: Fake GPU (UUID: GPU-$i)\"; done\n"
    write(os.path.join(four_bin, "nvidia-smi"), list_four, 0o755)
    write(os.path.join(four_bin, "nvidia-cuda-mps-control"),
          b'#!/bin/sh\nif [ "$1" = -d ]; then echo "start GPU $CUDA_VISIBLE_DEVICES $CUDA_MPS_PIPE_DIRECTORY" >> "$FAKE_MPS_CALLS"\n'
          b'else read line; echo "$line $CUDA_MPS_PIPE_DIRECTORY" >> "$FAKE_MPS_CALLS"; fi\n', 0o755)
    no_daemon_bin = os.path.join(tmp, "fake-nvidia-four-no-mps")  # the same GPUs, no daemon: PATH is this alone
    os.makedirs(no_daemon_bin)
    write(os.path.join(no_daemon_bin, "nvidia-smi"), list_four, 0o755)

    def mps_calls_file(name):
        return os.path.join(tmp, f"mps-calls-{name}.txt")

    def no_daemon_started(calls):
        def check(_output, _seconds):
            return f"a daemon was started: {open(calls).read()!r}" if os.path.exists(calls) else None
        return check
    placed_build = os.path.join(tmp, "placed-build")
    os.makedirs(os.path.join(placed_build, "fuzz"))
    fake_fuzzer(os.path.join(placed_build, "fuzz", "fuzz_layer"),
                'leaks=$(printf "%s\\n" "$@" | grep -c "^-detect_leaks=0$")\n'
                'echo "fuzz_layer: cannot start: fake, on GPU $CUDA_VISIBLE_DEVICES, leak checks off: $leaks" >&2; exit 2')
    on_four = {"PATH": four_bin + os.pathsep + os.environ.get("PATH", ""), "CUDA_VISIBLE_DEVICES": "3,1,7,2"}
    # --no-mps: no daemon although one is on PATH; each worker keeps its CUDA_VISIBLE_DEVICES, and the
    # report says MPS was off and why.
    refused_calls = mps_calls_file("refused")
    cases.append(Case("GPU workers stay on the caller's CUDA_VISIBLE_DEVICES, in turn; --no-mps starts no daemon",
                      campaign + ["--build-dir", placed_build, "--targets", "fuzz_layer", "--time", "1",
                                  "--workers-per-gpu", "2", "--out", out, "--progress", "0", "--no-mps"], 3,
                      [r"fuzz_layer: 4 worker\(s\) on 2 GPU\(s\) \(3,1\)",
                       r"^campaign: fuzz_layer: MPS off \(--no-mps\): the 2 workers of each GPU take turns on it",
                       r"execs/s: execs / time s(.|\n)*^fuzz_layer: MPS off \(--no-mps\)"] +
                      [fr"fuzz_layer worker {w} \(GPU {d}\) did not fuzz: .*on GPU {d}, leak checks off: 1 \(log "
                       for w, d in ((0, 3), (1, 1), (2, 3), (3, 1))], [r"MPS on"],
                      env={**on_four, "FAKE_MPS_CALLS": refused_calls}, check=no_daemon_started(refused_calls)))
    # MPS: one private control daemon per GPU, seeing that GPU alone, started before the workers and
    # told to quit after them; a worker names its daemon by CUDA_MPS_PIPE_DIRECTORY and has no
    # CUDA_VISIBLE_DEVICES (MPS clients must not set it). On by default where workers share a GPU
    # and the daemon is on PATH; --mps insists on it.
    mps_build = os.path.join(tmp, "mps-build")
    os.makedirs(os.path.join(mps_build, "fuzz"))
    fake_fuzzer(os.path.join(mps_build, "fuzz", "fuzz_layer"),
                'echo "fuzz_layer: cannot start: fake, pipe $CUDA_MPS_PIPE_DIRECTORY, devices [${CUDA_VISIBLE_DEVICES-unset}]" >&2; '
                'exit 2')

    def daemons_started_and_stopped(calls_file):
        def check(_output, _seconds):
            calls = open(calls_file).read().splitlines() if os.path.exists(calls_file) else []
            starts = [line for line in calls if line.startswith("start ")]
            quits = [line for line in calls if line.startswith("quit ")]
            wanted = [fr"start GPU {d} \S+/mps-gpu{d}/pipe$" for d in (3, 1)]
            if len(starts) != 2 or not all(re.match(w, s) for w, s in zip(wanted, starts)):
                return f"expected a daemon for GPU 3 then GPU 1, got {starts}"
            if sorted(q.split()[1] for q in quits) != sorted(s.split()[3] for s in starts):
                return f"expected each daemon told to quit, got {quits}"
            return None
        return check
    under_mps = [fr"fuzz_layer worker {w} \(GPU {d}\) did not fuzz: .*pipe \S+/mps-gpu{d}/pipe, devices \[unset\]"
                 for w, d in ((0, 3), (1, 1), (2, 3), (3, 1))]
    forced_calls, default_calls = mps_calls_file("forced"), mps_calls_file("default")
    cases.append(Case("--mps starts a daemon per GPU for its workers and stops it after them",
                      campaign + ["--build-dir", mps_build, "--targets", "fuzz_layer", "--time", "1", "--mps",
                                  "--workers-per-gpu", "2", "--out", out, "--progress", "0"], 3,
                      [r"fuzz_layer: MPS on \(--mps\): its workers run under 2 MPS daemon\(s\), one per GPU"] + under_mps,
                      env={**on_four, "FAKE_MPS_CALLS": forced_calls}, check=daemons_started_and_stopped(forced_calls)))
    cases.append(Case("workers sharing a GPU run under MPS by default where the daemon is on PATH, and the report says so",
                      campaign + ["--build-dir", mps_build, "--targets", "fuzz_layer", "--time", "1",
                                  "--workers-per-gpu", "2", "--out", out, "--progress", "0"], 3,
                      [r"^campaign: fuzz_layer: MPS on \(the default where workers share a GPU and "
                       r"nvidia-cuda-mps-control is on PATH; --no-mps runs without\): its workers run under 2 MPS "
                       r"daemon\(s\), one per GPU",
                       r"execs/s: execs / time s(.|\n)*^fuzz_layer: MPS on \(the default",
                       r"^fuzz_layer: its workers ran under MPS by default; if they could not reach the daemon"] + under_mps,
                      env={**on_four, "FAKE_MPS_CALLS": default_calls}, check=daemons_started_and_stopped(default_calls)))
    cases.append(Case("without the daemon on PATH, workers sharing a GPU run without MPS, and the report says why",
                      campaign + ["--build-dir", mps_build, "--targets", "fuzz_layer", "--time", "1",
                                  "--workers-per-gpu", "2", "--out", out, "--progress", "0"], 3,
                      [r"^campaign: fuzz_layer: MPS off \(nvidia-cuda-mps-control is not on PATH\): the 2 workers of "
                       r"each GPU take turns on it"] +
                      [fr"fuzz_layer worker {w} \(GPU {d}\) did not fuzz: .*devices \[{d}\]"
                       for w, d in ((0, 3), (1, 1), (2, 3), (3, 1))], [r"MPS on"],
                      env={"PATH": no_daemon_bin, "CUDA_VISIBLE_DEVICES": "3,1"}))
    failing_bin = os.path.join(tmp, "fake-nvidia-four-failing-mps")  # a daemon that does not start
    os.makedirs(failing_bin)
    write(os.path.join(failing_bin, "nvidia-smi"), list_four, 0o755)
    write(os.path.join(failing_bin, "nvidia-cuda-mps-control"),
          b"#!/bin/sh\necho 'An instance of this daemon is already running' >&2; exit 1\n", 0o755)
    cases.append(Case("a default MPS daemon that does not start leaves the workers without MPS, saying why",
                      campaign + ["--build-dir", mps_build, "--targets", "fuzz_layer", "--time", "1",
                                  "--workers-per-gpu", "2", "--out", out, "--progress", "0"], 3,
                      [r"^campaign: fuzz_layer: MPS off \(its daemon did not start: nvidia-cuda-mps-control -d for "
                       r"GPU 3 failed \(exit 1\): An instance of this daemon is already running\)"] +
                      [fr"fuzz_layer worker {w} \(GPU {d}\) did not fuzz: .*devices \[{d}\]"
                       for w, d in ((0, 3), (1, 1), (2, 3), (3, 1))], [r"MPS on"],
                      env={"PATH": failing_bin, "CUDA_VISIBLE_DEVICES": "3,1"}))
    cases.append(Case("--mps whose daemon does not start is a usage error",
                      campaign + ["--build-dir", mps_build, "--targets", "fuzz_layer", "--time", "1", "--mps",
                                  "--workers-per-gpu", "2", "--out", out, "--progress", "0"], 2,
                      [r"^campaign: --mps: nvidia-cuda-mps-control -d for GPU 3 failed \(exit 1\): An instance"],
                      [r"did not fuzz"], env={"PATH": failing_bin, "CUDA_VISIBLE_DEVICES": "3,1"}))
    cases.append(Case("--mps and --no-mps together are refused in one line",
                      campaign + ["--build-dir", mps_build, "--targets", "fuzz_layer", "--mps", "--no-mps"], 2,
                      [r"^campaign: --mps and --no-mps contradict each other$"], check=one_line, env=on_four))
    cases.append(Case("--mps without nvidia-cuda-mps-control on PATH is a usage error",
                      campaign + ["--build-dir", placed_build, "--targets", "fuzz_layer", "--time", "1", "--mps",
                                  "--out", out, "--progress", "0"], 2,
                      [r"^campaign: --mps: nvidia-cuda-mps-control is not on PATH"], check=one_line,
                      env={"PATH": fake_bin}))
    # Without --workers-per-gpu the host's cores are divided among the GPUs: one GPU, every core.
    core_count = len(os.sched_getaffinity(0))
    cases.append(Case("GPU workers default to the cores divided among the GPUs",
                      campaign + ["--build-dir", placed_build, "--targets", "fuzz_layer", "--time", "1",
                                  "--out", out, "--progress", "0"], 3,
                      [fr"fuzz_layer: {core_count} worker\(s\) on 1 GPU\(s\) \(3\)"],
                      env={**on_four, "CUDA_VISIBLE_DEVICES": "3", "FAKE_MPS_CALLS": mps_calls_file("cores")}))
    if opt.fuzzing:
        cases.append(Case("fuzz_gemm without a usable GPU on a GPU machine fails the campaign",
                          campaign + ["--build-dir", build, "--targets", "fuzz_gemm", "--time", "2", "--out", out,
                                      "--progress", "0", "--no-mps"], 3,
                          [r"fuzz_gemm worker 0 \(GPU 0\) did not fuzz: stopped before fuzzing .*MXDIFF_REQUIRE_GPU=1 \(a GPU is "
                           r"present\)"], env=with_gpu, timeout=120))
    cases += hostile_cases(opt, tmp, campaign, fuzzed, one_line)
    return [case for case in cases if case is not None]


def allowing_sanitizer(case):
    """The case's output may name AddressSanitizer: it is the report of the kernel's own crash."""
    case.never = [pattern for pattern in case.never if pattern != r"AddressSanitizer"]
    return case


def hostile_cases(opt, tmp, campaign, fuzzed, one_line):
    """Issue 34: a kernel that breaks the harness is never clean. A worker that crashes before fuzzing
    (in fuzz_gemm's known cases) is a finding naming the report and the input it ran; a module that
    declined every case did not fuzz; findings of one signature keep every input; the printed repro
    command of a Python kernel keeps its environment; --mps without a GPU is refused. Fake targets
    first (both builds), then the hostile kernel (hostile_kernel.cc) in the libFuzzer build."""
    cases = []
    no_gpu_bin = os.path.join(tmp, "no-gpu-bin")  # an nvidia-smi that lists no GPU, so these run on the CPU
    os.makedirs(no_gpu_bin)
    write(os.path.join(no_gpu_bin, "nvidia-smi"), b"#!/bin/sh\nexit 0\n", 0o755)
    no_gpu = {"PATH": no_gpu_bin + os.pathsep + os.environ.get("PATH", "")}
    crash_build = os.path.join(tmp, "crash-build")
    os.makedirs(os.path.join(crash_build, "fuzz"))
    # As fuzz_gemm does: the known case it runs is written to MXDIFF_RUNNING_INPUT, then the kernel crashes.
    fake_fuzzer(os.path.join(crash_build, "fuzz", "fuzz_reference"), """
for arg in "$@"; do case "$arg" in -merge=1) exit 0 ;; esac; done
echo "known" > "$MXDIFF_RUNNING_INPUT"; echo "known case 2 of 9 (fake)" > "$MXDIFF_RUNNING_INPUT.txt"
echo "==7==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x1" >&2
echo "SUMMARY: AddressSanitizer: heap-buffer-overflow /x/kernel.cc:10 in run" >&2; exit 1""")
    fake_fuzzer(os.path.join(crash_build, "fuzz", "fuzz_dispatch"), """
for arg in "$@"; do case "$arg" in -merge=1) exit 0 ;; esac; done
kill -SEGV $$""")
    crash = ["--build-dir", crash_build, "--jobs", "1", "--time", "1", "--out", os.path.join(tmp, "crash-out"),
             "--progress", "0"]
    cases += [
        allowing_sanitizer(Case(
            "a worker that crashes in initialization is a finding with its report and input",
            campaign + crash + ["--targets", "fuzz_reference"], 1,
            [r"^  sanitizer/AddressSanitizer/heap-buffer-overflow\n    \S*repro \S+/running-w0\.case   \(worker 0 "
             r"crashed before fuzzing, in this input: known case 2 of 9 \(fake\); the report: \S+/worker0\.log\)$",
             r"campaign: FINDINGS: 1 signature"], [r"clean", r"did not fuzz"])),
        Case("a worker killed by a signal before fuzzing is a finding, with no input to replay",
             campaign + crash + ["--targets", "fuzz_dispatch"], 1,
             [r"^  crash/SIGSEGV\n    worker 0 crashed before fuzzing, before any input ran .*the report: \S+/worker0\.log$"],
             [r"clean", r"did not fuzz"]),
    ]
    declined_build = os.path.join(tmp, "declined-build")
    os.makedirs(os.path.join(declined_build, "fuzz"))
    fake_fuzzer(os.path.join(declined_build, "fuzz", "fuzz_gemm"), """
for arg in "$@"; do case "$arg" in -merge=1) exit 0 ;; esac; done
printf 'cases 40\\nmodule_runs_ext-fake 40\\nmodule_declined_ext-fake 38\\nmodule_compared_ext-fake 0\\nseconds 1.0\\n' > "$MXDIFF_STATS_FILE"
""" + fuzzed + "exit 0")
    cases.append(Case("a module that declined every case did not fuzz",
                      campaign + ["--build-dir", declined_build, "--targets", "fuzz_gemm", "--external",
                                  opt.example_kernel, "--jobs", "1", "--time", "1", "--out", os.path.join(tmp, "dec-out"),
                                  "--progress", "0"], 3,
                      [r"declined by module \(not compared: .*\): ext-fake 38 of 40 case\(s\) \(95%\), 0 compared",
                       r"fuzz_gemm worker 0 did not fuzz: module ext-fake declined every case \(38 of 40 declined",
                       r"NOT FUZZED: 1 worker\(s\) did not fuzz"], [r"clean"], env=no_gpu))

    # Item 10: two workers write one signature for two inputs (each file named by its input's hash):
    # both are kept and the report says so.
    twice_build = os.path.join(tmp, "twice-build")
    os.makedirs(os.path.join(twice_build, "fuzz"))
    fake_fuzzer(os.path.join(twice_build, "fuzz", "fuzz_dispatch"), """
for arg in "$@"; do case "$arg" in -merge=1) exit 0 ;; esac; done
""" + fuzzed + """mkdir -p "$MXDIFF_FINDINGS_DIR"
echo "input $$" > "$MXDIFF_FINDINGS_DIR/fuzz_dispatch.mismatch_x.$$.case"
echo "signature: mismatch/x" > "$MXDIFF_FINDINGS_DIR/fuzz_dispatch.mismatch_x.$$.txt"
echo "==mxdiff== FINDING mismatch/x" >&2; exit 1""")
    twice_out = os.path.join(tmp, "twice-out")

    def both_kept(_output, _seconds):
        kept = glob.glob(os.path.join(twice_out, "*", "fuzz_dispatch", "findings", "*.case"))
        return None if len(kept) == 2 else f"{len(kept)} finding input(s) kept, expected 2"
    cases.append(Case("two inputs of one signature from two workers are both kept and counted",
                      campaign + ["--build-dir", twice_build, "--targets", "fuzz_dispatch", "--jobs", "2", "--time",
                                  "1", "--out", twice_out, "--progress", "0"], 1,
                      [r"^  mismatch/x\n    \S*repro \S+\.case   \(2 inputs kept: \S+/findings/\*\.case\)$"],
                      check=both_kept))

    # Item 18: the repro command of a --python finding keeps the kernel's whole environment.
    python_build = os.path.join(tmp, "python-build")
    os.makedirs(os.path.join(python_build, "fuzz"))
    fake_fuzzer(os.path.join(python_build, "fuzz", "fuzz_gemm"), """
for arg in "$@"; do case "$arg" in -merge=1) exit 0 ;; esac; done
""" + fuzzed + """mkdir -p "$MXDIFF_FINDINGS_DIR"
echo x > "$MXDIFF_FINDINGS_DIR/fuzz_gemm.python_raised.1.case"
echo "signature: python/raised" > "$MXDIFF_FINDINGS_DIR/fuzz_gemm.python_raised.1.txt"
echo "==mxdiff== FINDING python/raised" >&2; exit 1""")
    python_env = {**no_gpu, "MXDIFF_PYTHON": "kern:run", "MXDIFF_PYTHON_TIMEOUT": "7",
                  "MXDIFF_PYTHON_EXECUTABLE": "/opt/venv/bin/python3", "MXDIFF_PYTHON_MODE": "bound"}
    cases.append(Case("the repro command of a Python kernel's finding keeps its timeout and interpreter",
                      campaign + ["--build-dir", python_build, "--targets", "fuzz_gemm", "--external",
                                  opt.example_kernel, "--jobs", "1", "--time", "1", "--out",
                                  os.path.join(tmp, "python-out"), "--progress", "0"], 1,
                      [r"^    MXDIFF_PYTHON=kern:run (\S+=\S+ )*MXDIFF_PYTHON_TIMEOUT=7 MXDIFF_PYTHON_EXECUTABLE="
                       r"/opt/venv/bin/python3 \S+/repro \S+\.case --external="], env=python_env))

    # Item 18: --mps where no target runs on a GPU is refused, not ignored.
    mps_build = os.path.join(tmp, "mps-cpu-build")
    os.makedirs(os.path.join(mps_build, "fuzz"))
    for target in ("fuzz_dispatch", "fuzz_gemm"):
        fake_fuzzer(os.path.join(mps_build, "fuzz", target), fuzzed + "exit 0")
    mps_cpu = ["--build-dir", mps_build, "--jobs", "1", "--time", "1", "--mps", "--out",
               os.path.join(tmp, "mps-cpu-out"), "--progress", "0"]
    cases += [
        Case("--mps without a GPU is refused in one line",
             campaign + mps_cpu + ["--targets", "fuzz_gemm", "--external", opt.example_kernel], 2,
             [r"^campaign: --mps shares a GPU among its workers, and no target here runs on a GPU "
              r"\(nvidia-smi -L lists none\): leave --mps out$"], check=one_line, env=no_gpu),
        Case("--mps without a GPU target is refused in one line", campaign + mps_cpu + ["--targets", "fuzz_dispatch"], 2,
             [r"^campaign: --mps shares a GPU among its workers, and no target here runs on a GPU "
              r"\(--targets names no GPU target\): leave --mps out$"], check=one_line, env=no_gpu),
    ]

    if opt.fuzzing:  # the hostile kernel in real fuzz_gemm workers, on the CPU
        hostile = campaign + ["--build-dir", opt.build, "--targets", "fuzz_gemm", "--external", opt.hostile_kernel,
                              "--jobs", "1", "--out", os.path.join(tmp, "hostile-out"), "--progress", "0"]
        cases += [
            allowing_sanitizer(Case(
                "a kernel that segfaults on its first call is a finding, not clean", hostile + ["--time", "3"], 1,
                [r"^  sanitizer/AddressSanitizer/SEGV\n    \S*repro \S+/running-w0\.case --external=\S+hostile\S*\.so"
                 r"   \(worker 0 crashed before fuzzing, in this input: known case 1 of \d+ ",
                 r"campaign: FINDINGS: 1 signature"], [r"clean", r"did not fuzz"],
                env={**no_gpu, "MXDIFF_HOSTILE_KERNEL": "segv"}, timeout=180)),
            allowing_sanitizer(Case(
                "a kernel that writes one element past the output is a finding, not clean", hostile + ["--time", "3"],
                1, [r"^  sanitizer/AddressSanitizer/heap-buffer-overflow\n    \S*repro \S+/running-w0\.case "
                    r"--external=\S+   \(worker 0 crashed before fuzzing, in this input: known case 1 of "],
                [r"clean", r"did not fuzz"], env={**no_gpu, "MXDIFF_HOSTILE_KERNEL": "overflow"}, timeout=180)),
            Case("a kernel that declines every case is not fuzzed", hostile + ["--time", "5"], 3,
                 [r"fuzz_gemm worker 0 did not fuzz: module ext-hostile declined every case",
                  r"declined by module .*: ext-hostile \d+ of \d+ case\(s\) \(\d+%\), 0 compared",
                  r"NOT FUZZED: 1 worker\(s\) did not fuzz"], [r"clean"],
                 env={**no_gpu, "MXDIFF_HOSTILE_KERNEL": "decline"}, timeout=180),
            Case("a kernel that flushes subnormal inputs in place is a finding", hostile + ["--time", "5"], 1,
                 [r"inputs-modified", r"campaign: FINDINGS: "], [r"clean"],
                 env={**no_gpu, "MXDIFF_HOSTILE_KERNEL": "flush-in-place"}, timeout=180),
        ]
    return cases


def elf_type(path):
    with open(path, "rb") as binary:
        header = binary.read(18)
    return int.from_bytes(header[16:18], "little") if header[:4] == b"\x7fELF" else None


def take_option(name):
    """Removes `name VALUE` from sys.argv and returns VALUE (contract_cases.main parses the rest)."""
    if name not in sys.argv:
        sys.exit(f"campaign_test.py: {name} is required")
    index = sys.argv.index(name)
    value = sys.argv[index + 1]
    del sys.argv[index:index + 2]
    return os.path.abspath(value)


if __name__ == "__main__":
    HOSTILE_KERNEL = take_option("--hostile-kernel")
    sys.exit(contract_cases.main(__doc__, "--slow-kernel",
                                 lambda opt, tmp: build_cases(setattr(opt, "hostile_kernel", HOSTILE_KERNEL) or opt, tmp),
                                 "mxdiff-campaign-"))
