"""What the campaign reports about fuzz_gemm's comparisons (fuzz/README.md, "What the campaign reports").

Each fuzz_gemm worker rewrites a small stats file about once a second (MXDIFF_STATS_FILE, written
by fuzz/targets/fuzz_gemm.cc from fuzz/checks/gemm_differential.h's CountersText): one "name value"
line per counter. This module reads them, adds them up over the workers, turns the campaign's
samples of executions into a rate per interval and the rate sustained over the last minutes, and
formats the report. Pure functions: tests/tools/campaign/stats_test.py checks them on the CPU.
"""

import re

SHAPES = ("small", "decode", "huge")  # gemm_differential.h's ShapeClass
# The counters, in the stats file's order; "seconds" is the worker's time since its first case.
# "device_oracle" is 1 where the worker has the device reference (summed: the workers that have it).
COUNTERS = ("cases",) + SHAPES + ("elements", "cpu", "device", "cpu_checked", "fallbacks", "refused",
            "disagreements", "runs_refused", "device_oracle")
# The seconds a worker spent per phase are the "seconds_<phase>" lines, in gemm_differential.h's
# Phase order (read from the file, so a new phase needs no change here).
PHASE_PREFIX = "seconds_"
# An input's whole time (decode and evaluation) by its case's shape class: "shape_seconds_<class>",
# the class being one of the counters above.
SHAPE_PREFIX = "shape_seconds_"
# Those inputs' phases: "shape_phase_seconds_<class>_<phase>".
SHAPE_PHASE_PREFIX = "shape_phase_seconds_"


# Per kernel module, the fuzzed cases it was given, those it declined (MXDIFF_KERNEL_UNSUPPORTED, or out
# of memory) and those whose output was compared: "module_runs_<module>", "module_declined_<module>",
# "module_compared_<module>" (fuzz/targets/fuzz_gemm.cc).
MODULE_RUNS_PREFIX = "module_runs_"
MODULE_DECLINED_PREFIX = "module_declined_"
MODULE_COMPARED_PREFIX = "module_compared_"
# Per module, the runs judged by each plan (the one the module reported it ran, kernel C ABI
# version 2, else its tactic's): "module_plan_<module>_ctak<K>_splits<S>", and per kernel label the
# module reported, "module_kernel_<module>_<label>"; past 256 keys per module, "..._other"
# (fuzz/driver/gemm_counters.h).
MODULE_PLAN_PREFIX = "module_plan_"
MODULE_KERNEL_PREFIX = "module_kernel_"
_PLAN_KEY = re.compile(r"^module_plan_(.+)_(?:ctak(\d+)_splits(\d+)|other)$")


def _module_count(name):
    return name.startswith((MODULE_RUNS_PREFIX, MODULE_DECLINED_PREFIX, MODULE_COMPARED_PREFIX, MODULE_PLAN_PREFIX,
                            MODULE_KERNEL_PREFIX))


def _timed(name):
    return name.startswith(PHASE_PREFIX) or name.startswith(SHAPE_PREFIX) or name.startswith(SHAPE_PHASE_PREFIX)


def parse_stats(text):
    """The counters of one stats file's text: {name: int, "seconds": float}; lines that are not
    "name number" are ignored, missing counters are 0. None for an empty text (no file yet)."""
    if not text or not text.strip():
        return None
    stats = {name: 0 for name in COUNTERS}
    stats["seconds"] = 0.0
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 2 or (parts[0] not in stats and not _timed(parts[0]) and not _module_count(parts[0])):
            continue
        try:
            stats[parts[0]] = float(parts[1]) if parts[0] == "seconds" or _timed(parts[0]) else int(parts[1], 10)
        except ValueError:
            continue
    return stats


def read_stats(path):
    try:
        with open(path, errors="replace") as stats_file:
            return parse_stats(stats_file.read())
    except OSError:
        return None


def total(per_worker):
    """The counters added up over the workers that wrote a file (seconds: the longest)."""
    present = [s for s in per_worker if s is not None]
    if not present:
        return None
    timed = list(dict.fromkeys(name for s in present for name in s if _timed(name) or _module_count(name)))
    summed = {name: sum(s.get(name, 0.0 if _timed(name) else 0) for s in present) for name in list(COUNTERS) + timed}
    summed["seconds"] = max(s["seconds"] for s in present)
    return summed


def module_declines(stats):
    """[(module, cases it was given, cases it declined, cases compared)] of one stats file or a total,
    in the file's order. A file without the compared count (older) counts every case not declined."""
    if stats is None:
        return []
    found = []
    for key in stats:
        if key.startswith(MODULE_RUNS_PREFIX):
            module = key[len(MODULE_RUNS_PREFIX):]
            declined = stats.get(MODULE_DECLINED_PREFIX + module, 0)
            found.append((module, stats[key], declined, stats.get(MODULE_COMPARED_PREFIX + module, stats[key] - declined)))
    return found


def modules_that_declined_everything(stats):
    """The modules that were given cases and compared none of them (each declined, or refused by
    the dispatch rules): [(module, cases given, cases declined)]."""
    return [(module, runs, declined) for module, runs, declined, compared in module_declines(stats)
            if runs > 0 and compared == 0]


def declined_line(totals):
    """The share of the cases each module declined, or None for stats without the module counts."""
    declines = module_declines(totals)
    if not declines:
        return None
    return "  declined by module (not compared: MXDIFF_KERNEL_UNSUPPORTED or out of memory): " + "; ".join(
        f"{module} {declined} of {runs} case(s) ({100 * declined / runs if runs else 0:.0f}%), {compared} compared"
        for module, runs, declined, compared in declines)


def module_plans(stats):
    """{module: ([(cta_k, splits, runs)] ascending, then (None, None, runs) for "other"; [(kernel, runs)]
    most runs first)} of one stats file or a total. A kernel key is split at the longest module name
    the plans or the run counts name (module names may hold '_')."""
    if stats is None:
        return {}
    plans = {}
    for key, runs in stats.items():
        matched = _PLAN_KEY.match(key)
        if matched:
            cta_k, splits = matched.group(2), matched.group(3)
            plans.setdefault(matched.group(1), ([], []))[0].append(
                (int(cta_k) if cta_k else None, int(splits) if splits else None, runs))
    modules = set(plans) | {key[len(MODULE_RUNS_PREFIX):] for key in stats if key.startswith(MODULE_RUNS_PREFIX)}
    for key, runs in stats.items():
        if not key.startswith(MODULE_KERNEL_PREFIX):
            continue
        rest = key[len(MODULE_KERNEL_PREFIX):]
        owners = [module for module in modules if rest.startswith(module + "_") and len(rest) > len(module) + 1]
        if owners:
            module = max(owners, key=len)
            plans.setdefault(module, ([], []))[1].append((rest[len(module) + 1:], runs))
    for ran, kernels in plans.values():
        ran.sort(key=lambda plan: (plan[0] is None, plan[0] or 0, plan[1] or 0))
        kernels.sort(key=lambda kernel: (-kernel[1], kernel[0]))
    return plans


def plan_lines(totals):
    """Per module, the plans (cta_k and split count) its runs were judged by and the kernels it
    reported, with their runs: which of its plans the campaign exercised."""
    lines = []
    for module, (ran, kernels) in sorted(module_plans(totals).items()):
        text = ", ".join(f"k{cta_k}/s{splits} {runs}" if cta_k is not None else f"other {runs}"
                         for cta_k, splits, runs in ran)
        lines.append(f"  plans run by {module} (cta_k/splits runs): {text or '-'}"
                     + (f"; kernels: " + ", ".join(f"{kernel} {runs}" for kernel, runs in kernels) if kernels else ""))
    return lines


def interval_rates(samples, interval):
    """samples: [(seconds since the start, executions so far)], ascending. Returns one
    (start, end, executions, per second) per interval boundary reached: the samples at multiples
    of `interval` (the last one may end early, at the final sample, if a second or more after the
    boundary before it)."""
    if not samples or interval <= 0:
        return []
    rates = []
    start_t, start_n = 0.0, 0
    next_boundary = interval
    for index, (t, n) in enumerate(samples):
        last = index == len(samples) - 1
        # The last sample closes a partial interval, unless it is within a second of the previous
        # boundary (the final sample just after it: a near-empty interval would read as a stall).
        if t + 1e-9 >= next_boundary or (last and t >= start_t + 1):
            span = t - start_t
            rates.append((start_t, t, n - start_n, (n - start_n) / span if span > 0 else 0.0))
            start_t, start_n = t, n
            while next_boundary <= t + 1e-9:
                next_boundary += interval
    return rates


def sustained(samples, window):
    """Executions per second over the last `window` seconds of the samples (from the latest sample
    at or before end - window; the whole run when it is shorter): (rate, seconds covered)."""
    if not samples:
        return 0.0, 0.0
    end_t, end_n = samples[-1]
    start_t, start_n = 0.0, 0
    for t, n in samples:
        if t <= end_t - window + 1e-9:
            start_t, start_n = t, n
    span = end_t - start_t
    return ((end_n - start_n) / span if span > 0 else 0.0), span


def _shares(totals, prefix, worker_seconds, cases_of):
    """For each "<prefix><name>" total of seconds, "<name> <share>%, <ms> ms/case": its share of the
    seconds all workers ran, and per case of cases_of(name) (no ms where that is 0)."""
    parts = []
    for key in (key for key in totals if key.startswith(prefix)):
        name, cases = key[len(prefix):], cases_of(key[len(prefix):])
        share = totals[key] / worker_seconds if worker_seconds > 0 else 0.0
        per_case = f", {1e3 * totals[key] / cases:.3g} ms/case" if cases else ""
        parts.append(f"{name} {100 * share:.1f}%{per_case}")
    return parts


def phase_line(totals, worker_seconds):
    """Where the workers' time went: each phase's share of the seconds all workers ran (and per
    case), the rest being libFuzzer's own and the checks'."""
    parts = _shares(totals, PHASE_PREFIX, worker_seconds, lambda _: totals["cases"])
    rest = worker_seconds - sum(totals[key] for key in totals if key.startswith(PHASE_PREFIX))
    parts.append(f"other {100 * rest / worker_seconds:.1f}%" if worker_seconds > 0 else "other -")
    return f"  time by phase (of {worker_seconds:.0f} worker-seconds): " + "; ".join(parts)


def shape_line(totals, worker_seconds):
    """Where the workers' time went by the cases' shape class: each class's share of the seconds
    all workers ran, and its milliseconds per case of that class. None for stats without it."""
    if worker_seconds <= 0 or not any(key.startswith(SHAPE_PREFIX) for key in totals):
        return None
    parts = _shares(totals, SHAPE_PREFIX, worker_seconds, lambda shape: totals.get(shape, 0))
    return f"  time by shape class (of {worker_seconds:.0f} worker-seconds): " + "; ".join(parts)


def shape_phase_lines(totals):
    """What a case of each shape class costs and where: its milliseconds per case, by phase, the
    rest ("other") being libFuzzer's and the checks' own. Nothing for stats without it."""
    lines = []
    for shape in SHAPES:
        prefix = f"{SHAPE_PHASE_PREFIX}{shape}_"
        keys = [key for key in totals if key.startswith(prefix)]
        cases = totals.get(shape, 0)
        if not keys or not cases:
            continue
        whole = totals.get(SHAPE_PREFIX + shape, 0.0)
        parts = [f"{key[len(prefix):]} {1e3 * totals[key] / cases:.3g}" for key in keys]
        parts.append(f"other {1e3 * (whole - sum(totals[key] for key in keys)) / cases:.3g}")
        lines.append(f"    {shape}: {1e3 * whole / cases:.3g} ms/case = " + ", ".join(parts))
    return lines


def _rate(count, seconds):
    return f"{count / seconds:.3g}/s" if seconds > 0 else "-"


def report_lines(target, per_worker, elapsed, samples, interval, window=300):
    """The report block of one target: a row per worker and the total (cases per shape class,
    output elements compared and per second, cases judged on the CPU and on the device, the
    CPU-checked sample, fallbacks), then the executions per interval and the sustained rate."""
    lines = []
    totals = total(per_worker)
    if totals is not None:
        header = ("worker", "cases", "small", "decode", "huge", "elements", "elements/s", "cpu", "device",
                  "cpu-checked", "fallbacks", "refused", "device-vs-cpu")
        rows = [header]
        for index, stats in enumerate(per_worker):
            if stats is None:
                rows.append((str(index),) + ("-",) * (len(header) - 1))
                continue
            rows.append(_row(str(index), stats, stats["seconds"]))
        rows.append(_row("total", totals, elapsed))
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines.append(f"{target}: what was compared (the workers' stats files)")
        for row in rows:
            lines.append("  " + "  ".join(cell.rjust(widths[i]) for i, cell in enumerate(row)).rstrip())
        checked = totals["cpu"] + totals["cpu_checked"]
        present = sum(1 for stats in per_worker if stats is not None)
        lines.append(f"  device reference in {totals['device_oracle']} of {present} worker(s)"
                     + ("" if totals["device_oracle"] == present else
                        " (the others judge every case on the CPU: no device, or --cpu-check-every 0)"))
        lines.append(f"  checked on the CPU: {checked} case(s) ({totals['cpu']} judged on the CPU reference, "
                     f"{totals['cpu_checked']} device-judged cases also computed on the CPU: the sample); on the device: "
                     f"{totals['device']}; device-vs-CPU disagreements: {totals['disagreements']}; fallbacks to the "
                     f"CPU: {totals['fallbacks']} (no device reference) + {totals['refused']} (out of device memory); "
                     f"kernel runs refused out of memory: {totals['runs_refused']}")
        declines = declined_line(totals)
        if declines is not None:
            lines.append(declines)
        lines.extend(plan_lines(totals))
        worker_seconds = sum(stats["seconds"] for stats in per_worker if stats is not None)
        lines.append(phase_line(totals, worker_seconds))
        by_shape = shape_line(totals, worker_seconds)
        if by_shape is not None:
            lines.append(by_shape)
            lines.extend(shape_phase_lines(totals))
    rates = interval_rates(samples, interval)
    if rates:
        lines.append(f"{target}: executions per {interval} s interval: " +
                     ", ".join(f"{start:.0f}-{end:.0f} s {count} ({per:.1f}/s)" for start, end, count, per in rates))
        rate, span = sustained(samples, window)
        lines.append(f"{target}: sustained over the last {span:.0f} s: {rate:.1f} executions/s")
    return lines


def _row(name, stats, seconds):
    return (name, str(stats["cases"]), str(stats["small"]), str(stats["decode"]), str(stats["huge"]),
            str(stats["elements"]), _rate(stats["elements"], seconds), str(stats["cpu"]), str(stats["device"]),
            str(stats["cpu_checked"]), str(stats["fallbacks"]), str(stats["refused"]), str(stats["disagreements"]))
