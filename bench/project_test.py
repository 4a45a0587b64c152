#!/usr/bin/python3
"""bench/project.py on fixed inputs (bench/testdata/projection_test_inputs.json,
slotsim_replay.json): every figure checked against hand arithmetic."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import project  # noqa: E402

INPUTS = os.path.join(HERE, "testdata", "projection_test_inputs.json")
REPLAY = os.path.join(HERE, "testdata", "slotsim_replay.json")
# One bench397 run with every expert resident at 250 tok/s over 8 layers.
RESULTS = os.path.join(HERE, "testdata", "project_results.json")
# gate and up: 256 rows x 512 in Q1_0 (4 blocks of 18 bytes); down: 512
# rows x 256 in Q4_K (one block of 144 bytes).
SLICE = 2 * 256 * 4 * 18 + 512 * 144


class ProjectTest(unittest.TestCase):
    def run_main(self, *args):
        lines = []
        pred = project.main(["predict", "--inputs", INPUTS, *args], out=lines.append)
        return pred, "\n".join(lines)

    def test_slice_bytes_of_the_ud_q1_0_397b_checkpoint(self):
        ck = {"n_embd": 4096, "expert_ff": 1024,
              "expert_types": {"gate": "q1_0", "up": "q1_0", "down": "q1_0"}}
        # 3 x 4,194,304 weights / 128 x 18 bytes.
        self.assertEqual(project.slice_bytes(ck), 3 * 4194304 // 128 * 18)
        self.assertEqual(project.slice_bytes(ck), 1769472)

    def test_block_mismatch_is_an_error_naming_the_type(self):
        with self.assertRaisesRegex(ValueError, "128 columns are not whole q4_k blocks of 256"):
            project.tensor_bytes(256, 128, "q4_k")

    def test_slice_of_a_mixed_checkpoint(self):
        pred, text = self.run_main("--scenario", "fits")
        self.assertEqual(pred["slice_bytes"], SLICE)
        self.assertIn(f"= {SLICE:,} bytes", text)

    def test_replay_prediction(self):
        # "big": 3.2 MB of experts over 4 x 8 -> slice 100,000 bytes.
        pred, text = self.run_main("--scenario", "big", "--replay", REPLAY, "--results", RESULTS)
        self.assertEqual(pred["slice_bytes"], 100000)
        self.assertAlmostEqual(pred["arena_fraction"], 100000 / 3200000)
        self.assertAlmostEqual(pred["host_fraction"], 200000 / 3200000)
        # The lru row of the replay: 600 / 300 / 100 of 1000 lookups.
        for tier, share in (("device", 0.6), ("host", 0.3), ("disk", 0.1)):
            self.assertAlmostEqual(pred["shares"][tier], share)
        # 4 x 2 = 8 lookups; host 8 x 0.3 x 1e5 = 240 kB; disk 80 kB.
        self.assertAlmostEqual(pred["host_bytes_per_token"], 240000)
        self.assertAlmostEqual(pred["disk_bytes_per_token"], 80000)
        ms = pred["ms"]
        self.assertAlmostEqual(ms["pcie"], 320000 / 50e9 * 1e3)
        self.assertAlmostEqual(ms["disk"], 80000 / 1e9 * 1e3)
        # compute: 1000 / 250 tok/s / 8 layers = 0.5 ms per layer, x 4 + 0.5.
        self.assertAlmostEqual(ms["compute"], 2.5)
        self.assertAlmostEqual(ms["overlapped"], 2.5)
        self.assertAlmostEqual(ms["serial"], ms["compute"] + ms["pcie"] + ms["disk"])
        self.assertAlmostEqual(pred["tok_s"]["serial"], 1000 / ms["serial"])
        self.assertIn("serial:", text)
        self.assertIn("lookups per token = 4 x 2 = 8", text)

    def test_replay_in_slotsims_own_json(self):
        # tools/slotsim --json gives bytes per token per tier: 10 tokens x
        # 1 MB of disk = 100 slices of 1000 lookups -> disk 0.1, host 0.3.
        replay = os.path.join(HERE, "testdata", "slotsim_json_replay.json")
        pred, _ = self.run_main("--scenario", "big", "--replay", replay, "--results", RESULTS)
        for tier, share in (("device", 0.6), ("host", 0.3), ("disk", 0.1)):
            self.assertAlmostEqual(pred["shares"][tier], share)

    def test_tiers_holding_everything_need_no_replay(self):
        pred, text = self.run_main("--scenario", "fits")
        self.assertEqual(pred["shares"], {"device": 1.0, "host": 0.0, "disk": 0.0})
        # 32 x 110,592 bytes of experts < the 4 MB arena; compute 4 x 2 + 0.5 ms.
        self.assertAlmostEqual(pred["ms"]["serial"], 8.5)
        self.assertAlmostEqual(pred["tok_s"]["overlapped"], 1000 / 8.5)
        self.assertIn("arena holds every expert", text)

    def test_missing_replay_when_tiers_spill_to_disk(self):
        with self.assertRaisesRegex(SystemExit, "give --replay"):
            self.run_main("--scenario", "big", "--results", RESULTS)


if __name__ == "__main__":
    unittest.main()
