#!/usr/bin/python3
"""bench/report.py on a fixed results.json (bench/testdata/results_fixture.json:
made-up figures of the right shape, not a measurement)."""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pngplot  # noqa: E402
import report  # noqa: E402
import report_batched  # noqa: E402

FIXTURE = os.path.join(HERE, "testdata", "results_fixture.json")
SLOT = 589824 * 2 + 860160  # the fixture's bench35 Q4_K/Q6_K slice


class ReportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        cls.md_path = os.path.join(cls.tmp, "r.md")
        cls.png_path = os.path.join(cls.tmp, "r.png")
        report.main([FIXTURE, "--md", cls.md_path, "--png", cls.png_path])
        with open(cls.md_path) as f:
            cls.md = f.read()
        cls.results = report.load([FIXTURE])

    def test_shape_facts_take_the_slot_bytes_of_streamed_runs(self):
        f = report.shape_facts(self.results)[("bench35", "q4_k_m")]
        self.assertEqual(f["slice_bytes"], SLOT)
        self.assertEqual(f["expert_bytes"], SLOT * 8 * 256)

    def test_ceilings(self):
        f = report.shape_facts(self.results)[("bench35", "q4_k_m")]
        # 25% arena, uniform: 0.75 x 8 layers x 8 used x SLOT bytes per token.
        self.assertAlmostEqual(report.decode_ceiling(f, 0.25, 55.2),
                               55.2e9 / (0.75 * 64 * SLOT), places=6)
        self.assertIsNone(report.decode_ceiling(f, 1.0, 55.2))
        self.assertAlmostEqual(report.prompt_ceiling(f, 0.5, 55.2, 512),
                               512 * 55.2e9 / (0.5 * SLOT * 2048), places=6)

    def test_llama_match_is_nearest_placement(self):
        f = report.shape_facts(self.results)[("bench35", "q4_k_m")]
        key = ("bench35", "q4_k_m", 0.0)
        self.assertEqual(report.llama_match(self.results, key, 1.0, f)["placement"], "all_gpu")
        self.assertEqual(report.llama_match(self.results, key, 0.25, f)["n_cpu_moe"], 6)
        self.assertEqual(report.llama_match(self.results, key, 0.1, f)["n_cpu_moe"], 7)
        # llama.cpp ran at locality 0 only: locality 0.2 compares with those.
        self.assertEqual(report.llama_match(self.results, ("bench35", "q4_k_m", 0.2), 0.5, f)["n_cpu_moe"], 4)

    def test_markdown_rows(self):
        self.assertIn("## bench35 q4_k_m, routing locality 0.2", self.md)
        # 25% at locality 0: 500 / 250 decode, 3500 / 1000 prompt, hit 0.25,
        # 0.75 x 64 x SLOT / 1e6 MB per token.
        row = next(l for l in self.md.splitlines() if l.startswith("| 25% | cache | 500.0 |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        self.assertEqual(cells[5], "0.250")
        self.assertEqual(cells[6], f"{int(8 * 8 * 127 * 0.75) * SLOT / 127 / 1e6:,.2f}")
        self.assertEqual(cells[8], "0.00")  # nothing computed on the host CPU
        self.assertEqual(cells[15], "-ncmoe 6")
        self.assertEqual(cells[18:20], ["2.00", "3.50"])
        self.assertIn("| 5% | cache | failed: rc=1: generate: RESOURCE_EXHAUSTED", self.md)
        self.assertIn("| 0 | cpu | 0 | 0 | 0% | 150.0 | 80.0 |", self.md)

    def test_kernel_switches_are_listed_with_the_settings(self):
        self.assertNotIn("kernel switches", self.md)  # the fixture sets none
        results = report.load([FIXTURE])
        results["settings"][0]["kernel_switches"] = {"SLUICE_CUDA_DOWN_ROWS": "8",
                                                     "SLUICE_CUDA_PDL": "1"}
        self.assertIn("- Sluice kernel switches: SLUICE_CUDA_DOWN_ROWS=8 SLUICE_CUDA_PDL=1",
                      report.markdown(results, 55.2))

    def test_a_miss_policy_run_gets_its_own_row_and_targets(self):
        results = report.load([FIXTURE])
        base = next(r for r in results["sluice"] if r.get("ok") and r["fraction"] == 0.25
                    and float(r["locality"]) == 0 and r["shape"] == "bench35")
        host = json.loads(json.dumps(base))
        host["miss_policy"] = "host"
        host["mode"] = "cache, host misses"
        host["result"]["decode_tok_s"] = 750.0
        dec = host["result"]["experts"]["decode"]
        dec["bytes_host_computed"] = int(dec["tokens"] * 30e6)  # 30 MB a token
        results["sluice"].append(host)
        md = report.markdown(results, 55.2)
        row = next(l for l in md.splitlines() if l.startswith("| 25% | cache, host misses |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        self.assertEqual(cells[2], "750.0")
        self.assertEqual(cells[8], "30.00")
        self.assertIn("- bench35 q4_k_m locality 0, host misses, arena 25% vs llama.cpp "
                      "-ncmoe 6, decode: 3.00x (goal >= 2.0x): met", md)
        # The copy policy's own target is still there, and the all-resident
        # target is not repeated for the host policy.
        self.assertIn("- bench35 q4_k_m locality 0, arena 25% vs llama.cpp -ncmoe 6, decode: "
                      "2.00x (goal >= 2.0x): met", md)
        self.assertNotIn("host misses, all resident", md)
        # 30 MB a token at 750 tok/s computed by the host, plus the copies.
        moved = dec["bytes_moved"] / (dec["tokens"] / 750.0) / 1e9
        self.assertIn(f"- bench35 q4_k_m locality 0, host misses, arena 25%: misses served at "
                      f"{moved + 22.5:.1f} GB/s ({moved:.1f} copied over PCIe, 22.5 computed "
                      f"by the host CPU)", md)

    def test_streaming_is_judged_on_the_copy_batches_when_reported(self):
        results = report.load([FIXTURE])
        for r in results["sluice"]:
            if r.get("ok") and r["fraction"] < 1:
                r["result"]["experts"]["copy_bytes_per_s_estimate"] = 45e9
        md = report.markdown(results, 55.2)
        self.assertIn("- bench35 q4_k_m locality 0, miss-bound streaming (smallest arena): copy "
                      "batches at 45.0 GB/s, 47.0 GB/s averaged over decode (goal >= 80% of "
                      "55.2 GB/s): met", md)

    def test_targets_say_met_or_by_how_much(self):
        self.assertIn("- bench35 q4_k_m locality 0, arena 25% vs llama.cpp -ncmoe 6, decode: "
                      "2.00x (goal >= 2.0x): met", self.md)
        self.assertIn("- bench35 q4_k_m locality 0, arena 25% vs llama.cpp -ncmoe 6, prompt: "
                      "3.50x (goal >= 5.0x): NOT met (70% of the goal)", self.md)
        self.assertIn("all resident vs llama.cpp all on GPU, decode: 0.80x (goal >= 1.2x): "
                      "NOT met (67% of the goal)", self.md)
        self.assertIn("miss-bound streaming (smallest arena): 47.0 GB/s", self.md)

    def test_png_is_valid_and_draws_the_series(self):
        with open(self.png_path, "rb") as f:
            w, h, px = pngplot.decode_png_rgb(f.read())
        self.assertEqual(w, 1200)
        canvas = pngplot.Canvas(w, h)
        canvas.px = bytearray(px)
        # Re-create the decode panel's axes to find the 25% point of
        # locality 0 (first Sluice colour after the ceiling took it).
        panel = report.Panel(pngplot.Canvas(w, h), 110, 60, 450, 420, 10, 100000, "DECODE")
        x, y = round(panel.px(0.25)), round(panel.py(500.0))
        self.assertEqual(canvas.get(x, y), report.PALETTE[0])
        # llama.cpp's -ngl 0 point (80 tok/s at 0%) is a square of its colour.
        x, y = round(panel.px(0.0)), round(panel.py(80.0))
        self.assertEqual(canvas.get(x + 2, y + 2), report.PALETTE[2])
        # Background far from anything stays white.
        self.assertEqual(canvas.get(w - 3, 3), (255, 255, 255))

    def test_batched_plot_draws_both_programs(self):
        def row(seqs, tok_s):
            return {"ok": True, "shape": "bench35", "mix": "q4_k_m", "locality": 0.0,
                    "fraction": 1.0, "sequences": seqs, "decode_tok_s": tok_s}
        batched = {"sluice": [row(1, 100.0), row(8, 800.0)],
                   "llama": [row(1, 200.0), row(8, 400.0)]}
        path = os.path.join(self.tmp, "batched.png")
        self.assertIsNotNone(report_batched.plot(batched, path, report.PALETTE))
        with open(path, "rb") as f:
            w, h, px = pngplot.decode_png_rgb(f.read())
        canvas = pngplot.Canvas(w, h)
        canvas.px = bytearray(px)
        ax = report_batched.axes_for(report_batched.series(batched))
        col = report.PALETTE[0]
        # Sluice's 8-sequence circle, llama.cpp's 1-sequence square (its
        # corner: a circle's would be white).
        self.assertEqual(canvas.get(round(ax.px(8)), round(ax.py(800.0))), col)
        self.assertEqual(canvas.get(round(ax.px(1)) + 3, round(ax.py(200.0)) + 3), col)
        self.assertEqual(canvas.get(w - 3, 3), (255, 255, 255))
        # Nothing to plot: no file.
        self.assertIsNone(report_batched.plot({"sluice": [], "llama": []},
                                              os.path.join(self.tmp, "none.png"), report.PALETTE))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "none.png")))

    def test_markdown_alone_without_png(self):
        md = os.path.join(self.tmp, "alone.md")
        png = os.path.join(self.tmp, "alone.png")
        report.main([FIXTURE, "--md", md])
        with open(md) as f:
            self.assertEqual(f.read(), self.md)
        self.assertFalse(os.path.exists(png))

    def test_merging_two_files_keeps_models_once(self):
        merged = report.load([FIXTURE, FIXTURE])
        self.assertEqual(len(merged["models"]), 2)
        self.assertEqual(len(merged["sluice"]), 2 * len(self.results["sluice"]))


class PngTest(unittest.TestCase):
    def test_round_trip(self):
        c = pngplot.Canvas(7, 5)
        c.set(3, 2, (1, 2, 3))
        w, h, px = pngplot.decode_png_rgb(c.png())
        self.assertEqual((w, h), (7, 5))
        self.assertEqual(px[3 * (2 * 7 + 3):3 * (2 * 7 + 3) + 3], bytes((1, 2, 3)))
        self.assertEqual(px[:3], bytes((255, 255, 255)))

    def test_text_draws_glyph_pixels(self):
        c = pngplot.Canvas(20, 10)
        self.assertEqual(c.text(0, 0, "1"), 6)
        # '1' is 4,12,4,4,4,4,14: column 2 set in row 0, column 0 not.
        self.assertEqual(c.get(2, 0), (0, 0, 0))
        self.assertEqual(c.get(0, 0), (255, 255, 255))


if __name__ == "__main__":
    unittest.main()
