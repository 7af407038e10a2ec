#!/usr/bin/env python3
"""The campaign's report of fuzz_gemm's comparisons (tools/campaign/campaign_stats.py), on the CPU:
the stats file fuzz_gemm writes is parsed, added up over the workers, the executions are turned
into a rate per interval and a sustained rate, and the report names every count."""
import os
import sys
import unittest

REPO = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
sys.path.insert(0, os.path.join(REPO, "tools", "campaign"))
import campaign_stats  # noqa: E402

# What fuzz/checks/gemm_differential.cc's CountersText writes, with fuzz_gemm's "seconds" line.
WORKER0 = """cases 100
small 60
decode 35
huge 5
elements 4000000
cpu 62
device 38
cpu_checked 3
fallbacks 1
refused 1
disagreements 0
runs_refused 2
device_oracle 1
seconds_decode 1.000
seconds_admission 0.500
seconds_kernels 4.000
seconds_cpu_reference 2.000
seconds_device_reference 0.500
shape_seconds_small 1.200
shape_seconds_decode 3.500
shape_seconds_huge 4.000
shape_phase_seconds_decode_decode 0.350
shape_phase_seconds_decode_kernels 2.800
seconds 10.0
"""
WORKER1 = WORKER0.replace("cases 100", "cases 50").replace("elements 4000000", "elements 1000000").replace(
    "seconds 10.0", "seconds 20.0")


class Parse(unittest.TestCase):
    def test_every_counter(self):
        stats = campaign_stats.parse_stats(WORKER0)
        self.assertEqual(stats["cases"], 100)
        self.assertEqual((stats["small"], stats["decode"], stats["huge"]), (60, 35, 5))
        self.assertEqual((stats["cpu"], stats["device"], stats["cpu_checked"]), (62, 38, 3))
        self.assertEqual((stats["fallbacks"], stats["refused"], stats["runs_refused"]), (1, 1, 2))
        self.assertEqual(stats["seconds"], 10.0)
        self.assertEqual((stats["seconds_decode"], stats["seconds_kernels"]), (1.0, 4.0))
        self.assertEqual(stats["shape_seconds_huge"], 4.0)

    def test_empty_and_garbage(self):
        self.assertIsNone(campaign_stats.parse_stats(""))
        stats = campaign_stats.parse_stats("cases x\nbogus 3\nelements 7 8\ndevice 4\n")
        self.assertEqual((stats["cases"], stats["elements"], stats["device"]), (0, 0, 4))

    def test_read_missing_file(self):
        self.assertIsNone(campaign_stats.read_stats("/nonexistent/stats-w0.txt"))


class Aggregate(unittest.TestCase):
    def test_total_over_workers(self):
        per_worker = [campaign_stats.parse_stats(WORKER0), None, campaign_stats.parse_stats(WORKER1)]
        totals = campaign_stats.total(per_worker)
        self.assertEqual(totals["cases"], 150)
        self.assertEqual(totals["elements"], 5000000)
        self.assertEqual(totals["device"], 76)
        self.assertEqual(totals["seconds"], 20.0)
        self.assertEqual(totals["seconds_cpu_reference"], 4.0)  # summed, unlike the elapsed seconds
        self.assertIsNone(campaign_stats.total([None, None]))

    def test_interval_rates(self):
        samples = [(30.0, 300), (60.0, 900), (90.0, 900), (100.0, 1000)]
        rates = campaign_stats.interval_rates(samples, 30)
        self.assertEqual([(s, e, n) for s, e, n, _ in rates], [(0.0, 30.0, 300), (30.0, 60.0, 600),
                                                               (60.0, 90.0, 0), (90.0, 100.0, 100)])
        self.assertAlmostEqual(rates[1][3], 20.0)
        self.assertAlmostEqual(rates[3][3], 10.0)
        self.assertEqual(campaign_stats.interval_rates([], 30), [])
        # a final sample a moment after the last boundary closes no interval of its own
        rates = campaign_stats.interval_rates([(30.0, 300), (30.4, 300)], 30)
        self.assertEqual([(s, e, n) for s, e, n, _ in rates], [(0.0, 30.0, 300)])

    def test_sustained_over_the_last_window(self):
        samples = [(t, 10 * t if t <= 300 else 3000 + 100 * (t - 300)) for t in range(30, 601, 30)]
        rate, span = campaign_stats.sustained(samples, 300)
        self.assertEqual(span, 300)
        self.assertAlmostEqual(rate, 100.0)
        rate, span = campaign_stats.sustained([(30, 60), (60, 120)], 300)  # shorter than the window
        self.assertEqual(span, 60)
        self.assertAlmostEqual(rate, 2.0)


class Report(unittest.TestCase):
    def test_report_names_every_count(self):
        per_worker = [campaign_stats.parse_stats(WORKER0), campaign_stats.parse_stats(WORKER1)]
        lines = campaign_stats.report_lines("fuzz_gemm", per_worker, 20.0, [(10.0, 100), (20.0, 150)], 10)
        text = "\n".join(lines)
        self.assertIn("worker", lines[1])
        total = [line for line in lines if line.strip().startswith("total")][0].split()
        # total  cases small decode huge elements elements/s cpu device cpu-checked fallbacks refused device-vs-cpu
        self.assertEqual(total[1:6], ["150", "120", "70", "10", "5000000"])
        self.assertEqual(total[6], "2.5e+05/s")
        self.assertEqual(total[7:9], ["124", "76"])
        self.assertIn("checked on the CPU: 130 case(s)", text)
        self.assertIn("device reference in 2 of 2 worker(s)", text)
        self.assertIn("the sample); on the device: 76", text)
        self.assertIn("device-vs-CPU disagreements: 0", text)
        self.assertIn("executions per 10 s interval: 0-10 s 100 (10.0/s), 10-20 s 50 (5.0/s)", text)
        self.assertIn("sustained over the last 20 s: 7.5 executions/s", text)
        # 30 worker-seconds: decode 2 s of them over 150 cases, the phases 16 s, the rest 14 s
        self.assertIn("time by phase (of 30 worker-seconds): decode 6.7%, 13.3 ms/case; admission 3.3%", text)
        self.assertIn("device_reference 3.3%, 6.67 ms/case; other 46.7%", text)
        # each class's seconds over the 30 worker-seconds, and per case of that class (120, 70, 10)
        self.assertIn("time by shape class (of 30 worker-seconds): small 8.0%, 20 ms/case; decode 23.3%, "
                      "100 ms/case; huge 26.7%, 800 ms/case", text)
        # a decode case's 100 ms: 0.7 s of decoding and 5.6 s of kernels over its 70 cases, the rest other
        self.assertIn("\n    decode: 100 ms/case = decode 10, kernels 80, other 10\n", text + "\n")
        self.assertNotIn("    small:", text)

    def test_stats_without_shape_seconds_have_no_shape_line(self):
        old = "".join(line + "\n" for line in WORKER0.splitlines() if not line.startswith("shape_seconds_"))
        lines = campaign_stats.report_lines("fuzz_gemm", [campaign_stats.parse_stats(old)], 10.0, [], 10)
        self.assertFalse([line for line in lines if "shape class" in line])
        self.assertTrue([line for line in lines if "time by phase" in line])



class Declined(unittest.TestCase):
    """Issue 34: per module, the cases it ran and declined; one that declined every case compared nothing."""
    MODULES = "module_runs_ext-k 40\nmodule_declined_ext-k 10\nmodule_runs_folded 40\nmodule_declined_folded 0\n"

    def test_counted_summed_and_reported(self):
        per_worker = [campaign_stats.parse_stats(WORKER0 + self.MODULES),
                      campaign_stats.parse_stats(WORKER1 + self.MODULES.replace("declined_ext-k 10", "declined_ext-k 30"))]
        totals = campaign_stats.total(per_worker)
        self.assertEqual(campaign_stats.module_declines(totals), [("ext-k", 80, 40, 40), ("folded", 80, 0, 80)])
        self.assertEqual(campaign_stats.modules_that_declined_everything(totals), [])
        text = "\n".join(campaign_stats.report_lines("fuzz_gemm", per_worker, 20.0, [], 10))
        self.assertIn("declined by module (not compared: MXDIFF_KERNEL_UNSUPPORTED or out of memory): "
                      "ext-k 40 of 80 case(s) (50%), 40 compared; folded 0 of 80 case(s) (0%), 80 compared", text)

    def test_a_module_that_declined_every_case(self):
        stats = campaign_stats.parse_stats(WORKER0 + self.MODULES.replace("declined_ext-k 10", "declined_ext-k 40"))
        self.assertEqual(campaign_stats.modules_that_declined_everything(stats), [("ext-k", 40, 40)])
        # declined or refused by the dispatch rules, none compared: the same
        stats = campaign_stats.parse_stats(WORKER0 + "module_runs_ext-k 40\nmodule_declined_ext-k 37\n"
                                           "module_compared_ext-k 0\n")
        self.assertEqual(campaign_stats.modules_that_declined_everything(stats), [("ext-k", 40, 37)])
        self.assertEqual(campaign_stats.modules_that_declined_everything(campaign_stats.parse_stats(WORKER0)), [])
        self.assertEqual(campaign_stats.modules_that_declined_everything(None), [])


class Plans(unittest.TestCase):
    """Issue 36: per module, the plans (cta_k, split count) its runs were judged by and the kernels it
    reported (fuzz/driver/gemm_counters.h), summed over the workers and listed per module."""
    PLANS = ("module_runs_ext-tm_x 9\nmodule_plan_ext-tm_x_ctak64_splits3 2\nmodule_plan_ext-tm_x_ctak32_splits10 1\n"
             "module_plan_ext-tm_x_ctak32_splits2 4\nmodule_plan_ext-tm_x_other 2\n"
             "module_kernel_ext-tm_x_sm70_884_a 3\nmodule_kernel_ext-tm_x_b 6\nmodule_plan_ordinary_ctak32_splits1 5\n")

    def test_counted_summed_and_listed(self):
        per_worker = [campaign_stats.parse_stats(worker + self.PLANS) for worker in (WORKER0, WORKER1)]
        totals = campaign_stats.total(per_worker)
        self.assertEqual(campaign_stats.module_plans(totals),
                         {"ext-tm_x": ([(32, 2, 8), (32, 10, 2), (64, 3, 4), (None, None, 4)],
                                       [("b", 12), ("sm70_884_a", 6)]),
                          "ordinary": ([(32, 1, 10)], [])})
        text = "\n".join(campaign_stats.report_lines("fuzz_gemm", per_worker, 20.0, [], 10))
        self.assertIn("\n  plans run by ext-tm_x (cta_k/splits runs): k32/s2 8, k32/s10 2, k64/s3 4, other 4; "
                      "kernels: b 12, sm70_884_a 6\n  plans run by ordinary (cta_k/splits runs): k32/s1 10\n", text)

    def test_stats_without_plans_list_none(self):
        self.assertEqual(campaign_stats.module_plans(campaign_stats.parse_stats(WORKER0)), {})
        text = "\n".join(campaign_stats.report_lines("fuzz_gemm", [campaign_stats.parse_stats(WORKER0)], 10.0, [], 10))
        self.assertNotIn("plans run by", text)


if __name__ == "__main__":
    unittest.main()
