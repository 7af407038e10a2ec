"""The harness the table-driven contract tests share (tests/tools/cli/cli_contract_test.py,
tests/tools/campaign/campaign_test.py): a Case is one command with its expected exit status, what
its output must and must never say, and its own time limit; run() runs one, run_cases() runs a
table of them and prints one line a case (and, for a failure, the command, what was wrong and the
end of the output); main() is a test's command line. Each test imports it from its parent folder (sys.path) and keeps its own
defaults (the time limit, the patterns no output may have)."""
import argparse
import os
import re
import signal
import subprocess
import tempfile
import time


class Case:
    def __init__(self, name, argv, status, says=(), never=(), timeout=30, env=None, check=None, before=None,
                 cwd=None, stdout=None, stderr=None):
        self.name, self.argv, self.status = name, argv, status
        self.says, self.never = list(says), list(never)
        self.timeout, self.env, self.cwd = timeout, env or {}, cwd
        self.stdout = stdout  # a path the tool's stdout is opened on (/dev/full); stderr is still read
        self.stderr = stderr  # likewise for stderr; stdout is still read
        self.check = check    # called after the run (see checked()); returns error text or None
        self.before = before  # callable() run first (the state the check compares against)

    def checked(self, output, seconds):
        """What the check says about the run: check(output) here; a test whose checks also take the
        run's seconds overrides this."""
        return self.check(output)


def run(case, term_grace=None):
    """Runs the case in its own session; (exit status or None for a hang, output, seconds). On a hang
    the session gets SIGKILL, or first SIGTERM and term_grace seconds to stop where it is given."""
    env = dict(os.environ, **case.env)
    started = time.time()
    sink = open(case.stdout, "wb") if case.stdout else None  # then stderr is what is checked
    error_sink = open(case.stderr, "wb") if case.stderr else None  # then stdout is
    process = subprocess.Popen(case.argv, stdout=sink or subprocess.PIPE,
                               stderr=error_sink or (subprocess.PIPE if sink else subprocess.STDOUT), env=env,
                               start_new_session=True, cwd=case.cwd)
    for opened in (sink, error_sink):
        if opened:
            opened.close()

    def said(streams):
        return (streams[1] if sink else streams[0]) or b""

    try:
        output = said(process.communicate(timeout=case.timeout))
    except subprocess.TimeoutExpired:
        output = None
        if term_grace is not None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                output = said(process.communicate(timeout=term_grace))
            except subprocess.TimeoutExpired:
                pass
        if output is None:
            os.killpg(process.pid, signal.SIGKILL)
            output = said(process.communicate())
        return None, output.decode(errors="replace"), time.time() - started
    return process.returncode, output.decode(errors="replace"), time.time() - started


def run_cases(cases, term_grace=None):
    """Runs every case in order (its before() first); prints a line a case and a summary. Returns the
    number of cases that failed."""
    failures = 0
    for case in cases:
        if case.before:
            case.before()
        status, output, seconds = run(case, term_grace)
        problems = []
        if status is None:
            problems.append(f"no exit within {case.timeout} s (a hang): killed")
        elif status != case.status:
            problems.append(f"exit status {status}, expected {case.status}")
        for pattern in case.says:
            if not re.search(pattern, output, re.M):
                problems.append(f"output lacks /{pattern}/")
        for pattern in case.never:
            if re.search(pattern, output, re.M):
                problems.append(f"output has /{pattern}/")
        if case.check and status is not None:
            extra = case.checked(output, seconds)
            if extra:
                problems.append(extra)
        print(f"{'ok  ' if not problems else 'FAIL'} {case.name} (exit {status}, {seconds:.1f} s)", flush=True)
        if problems:
            failures += 1
            command = " ".join(a.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                               for a in case.argv)  # a path may hold any bytes
            env = " ".join(f"{k}={v}" for k, v in case.env.items())
            print(f"     command: {env + ' ' if env else ''}{command}" + (f" (in {case.cwd})" if case.cwd else ""))
            for p in problems:
                print(f"     {p}")
            print("     output:\n" + "\n".join("       | " + line for line in output.splitlines()[-40:]))
    print(f"{len(cases) - failures} of {len(cases)} cases passed")
    return failures


def write(path, data, mode=None):
    with open(path, "wb") as out:
        out.write(data)
    if mode is not None:
        os.chmod(path, mode)
    return path


def fake_fuzzer(path, body):
    """An executable that passes the campaign's libFuzzer check (it names libFuzzer's flags) and does
    what `body` (sh) says: how a target that stops at start-up, or runs zero executions, looks."""
    with open(path, "w") as out:
        out.write("#!/bin/sh\n# looks like libFuzzer: max_total_time merge_control_file\n" + body + "\n")
    os.chmod(path, 0o755)


def main(doc, kernel_option, build_cases, prefix, term_grace=None):
    """A contract test's command line: --repo, --build, --example-kernel, `kernel_option` (the test's
    own kernel library), --fuzzing, -k; the paths made absolute. Runs the cases that
    build_cases(opt, tmp) lists (those whose name contains -k) in a temporary folder named
    `prefix`...; returns the exit status (1 when a case failed)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--build", required=True)
    parser.add_argument("--example-kernel", required=True)
    parser.add_argument(kernel_option, required=True)
    parser.add_argument("--fuzzing", type=int, default=0)
    parser.add_argument("-k", default="", help="run only the cases whose name contains this")
    opt = parser.parse_args()
    kernel = kernel_option.lstrip("-").replace("-", "_")
    opt.repo, opt.build = os.path.abspath(opt.repo), os.path.abspath(opt.build)
    opt.example_kernel = os.path.abspath(opt.example_kernel)
    setattr(opt, kernel, os.path.abspath(getattr(opt, kernel)))
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        failures = run_cases([c for c in build_cases(opt, tmp) if opt.k in c.name], term_grace)
    return 1 if failures else 0
