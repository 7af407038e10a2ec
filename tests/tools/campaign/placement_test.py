#!/usr/bin/env python3
"""The campaign's GPU worker placement (tools/campaign/campaign: visible_gpus, place_workers), for
any number of GPUs, without one. Usage: placement_test.py REPO"""
import importlib.machinery
import importlib.util
import os
import sys
import unittest

REPO = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "..")
loader = importlib.machinery.SourceFileLoader("campaign", os.path.join(REPO, "tools", "campaign", "campaign"))
spec = importlib.util.spec_from_loader("campaign", loader)
campaign = importlib.util.module_from_spec(spec)
loader.exec_module(campaign)


class VisibleGpus(unittest.TestCase):
    def test_unset_means_every_listed_gpu(self):
        self.assertEqual(campaign.visible_gpus(8, None), [str(i) for i in range(8)])
        self.assertEqual(campaign.visible_gpus(0, None), [])

    def test_the_callers_choice_is_kept_in_its_order(self):
        self.assertEqual(campaign.visible_gpus(8, "6,2"), ["6", "2"])
        self.assertEqual(campaign.visible_gpus(4, " 3 , 0 "), ["3", "0"])
        self.assertEqual(campaign.visible_gpus(2, "GPU-ab12,MIG-cd34"), ["GPU-ab12", "MIG-cd34"])
        self.assertEqual(campaign.visible_gpus(4, "1,1,2"), ["1", "2"])

    def test_read_as_cuda_reads_it_up_to_the_first_invalid_entry(self):
        self.assertEqual(campaign.visible_gpus(4, "2,9,1"), ["2"])
        self.assertEqual(campaign.visible_gpus(4, "-1"), [])
        self.assertEqual(campaign.visible_gpus(4, ""), [])
        self.assertEqual(campaign.visible_gpus(4, "none"), [])
        self.assertEqual(campaign.visible_gpus(0, "0,1"), [])


class PlaceWorkers(unittest.TestCase):
    def test_every_gpu_gets_the_same_number_and_neighbours_differ(self):
        for gpus in (1, 2, 3, 8, 64):
            devices = [str(i) for i in range(gpus)]
            for per_gpu in (1, 2, 4):
                placed = campaign.place_workers(devices, per_gpu)
                self.assertEqual(len(placed), gpus * per_gpu)
                self.assertEqual({d: placed.count(d) for d in devices}, {d: per_gpu for d in devices})
                self.assertEqual(placed[:gpus], devices)

    def test_the_callers_devices_only(self):
        self.assertEqual(campaign.place_workers(["5", "GPU-x"], 2), ["5", "GPU-x", "5", "GPU-x"])


if __name__ == "__main__":
    unittest.main()
