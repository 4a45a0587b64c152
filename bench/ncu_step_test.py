"""ncu_step.py on a small ncu CSV written here: the last launches, their
figures and the sum."""
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_step  # noqa: E402

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
          '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
          '"Metric Value"')


def launch(kid, name, grid, us, mb, warps_pct, issue_pct, kinst):
    values = {
        "gpu__time_duration.sum": f"{us * 1000:,.0f}",
        "dram__bytes_read.sum": f"{mb * 1e6:,.0f}",
        "sm__warps_active.avg.pct_of_peak_sustained_active": f"{warps_pct}",
        "smsp__issue_active.avg.pct_of_peak_sustained_active": f"{issue_pct}",
        "smsp__inst_executed.sum": f"{kinst * 1000:,.0f}",
    }
    return [f'"{kid}","1","generate","h","{name}","1","13","(128, 1, 1)","{grid}","0","9.0",'
            f'"Command line profiler metrics","{m}","x","{v}"' for m, v in values.items()]


class NcuStepTest(unittest.TestCase):
    def run_on(self, lines, launches):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write("\n".join(lines) + "\n")
        out = io.StringIO()
        with redirect_stdout(out):
            self.assertEqual(ncu_step.main([f.name, "--launches", str(launches)]), 0)
        os.unlink(f.name)
        return out.getvalue().splitlines()

    def test_last_launches_and_their_sum(self):
        lines = ["==PROF== Connected to process 1", HEADER]
        lines += launch(0, "void ns::PrefillKernel(ns::Args)", "(8, 1, 1)", 99.0, 50.0, 50.0, 50.0, 1)
        lines += launch(1, "void ns::<unnamed>::StreamProjectKernel<4>(ns::StreamLaunch)",
                        "(264, 1, 1)", 23.4, 16.4, 12.5, 28.0, 6195)
        lines += launch(2, "ns::DownKernel(ns::DecodeExperts, int, int, int)", "(128, 1, 1)",
                        20.0, 5.0, 13.0, 14.0, 2393)
        out = self.run_on(lines, 2)
        self.assertEqual(len(out), 4)  # header, two launches, total
        self.assertTrue(out[1].startswith("StreamProjectKernel<4>"))
        fields = out[1].split()
        # us, MB, GB/s (16.4 MB in 23.4 us), warps/SM (12.5% of 64), issue%, kinst
        self.assertEqual(fields[-6:], ["23.40", "16.40", "701", "8.0", "28.0", "6195"])
        self.assertTrue(out[2].startswith("DownKernel"))
        self.assertEqual(out[3], "total 2 launches 43.4 us 21.4 MB")

    def test_no_header_is_an_error(self):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write("==ERROR== profiling failed\n")
        with self.assertRaises(ValueError):
            ncu_step.main([f.name])
        os.unlink(f.name)

    def test_time_only_step_from_its_first_kernel_by_kernel(self):
        # Two steps of a batch pass, each from its embedding; only the time
        # metric, in ns as ncu prints it.
        def timed(kid, name, grid, ns):
            return [f'"{kid}","1","batch_decode","h","{name}","1","13","(128, 1, 1)","{grid}",'
                    f'"0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns",'
                    f'"{ns:,}"']
        lines = ["==PROF== Connected to process 1", HEADER]
        kid = 0
        for step in range(2):
            for name, grid, ns in [("void ns::DequantRowsKernel(int)", "(8, 8, 1)", 3400),
                                   ("void ns::StreamGroupsKernel<4, 1>(ns::S)", "(528, 1, 1)",
                                    40000 + step),
                                   ("void ns::TopKKernel(int)", "(8, 1, 1)", 6400),
                                   ("void ns::StreamGroupsKernel<4, 1>(ns::S)", "(528, 1, 1)",
                                    41000),
                                   ("void ns::StreamGroupsKernel<4, 1>(ns::S)", "(512, 1, 1)",
                                    11000)]:
                lines += timed(kid, name, grid, ns)
                kid += 1
        out = self.run_on_args(lines, ["--from-last", "DequantRowsKernel", "--by-kernel"])
        self.assertEqual(len(out), 6)  # header, four kernel-and-grid rows, total
        first = out[1].split()
        self.assertEqual(first[:3], ["StreamGroupsKernel<4,", "1>", "(528,"])
        self.assertEqual(first[-3:], ["2", "81.0", "40.50"])  # the second step's 40,001 + 41,000 ns
        self.assertEqual(out[2].split()[-3:], ["1", "11.0", "11.00"])
        self.assertEqual(out[3].split()[-3:], ["1", "6.4", "6.40"])
        self.assertEqual(out[-1], "total 5 launches 101.8 us")
        # Launch by launch: the metrics ncu was not asked for print "-".
        out = self.run_on_args(lines, ["--from-last", "DequantRowsKernel"])
        self.assertEqual(len(out), 7)
        self.assertEqual(out[1].split()[-6:], ["3.40", "-", "-", "-", "-", "-"])
        self.assertEqual(out[-1], "total 5 launches 101.8 us 0.0 MB")
        with self.assertRaises(ValueError):
            self.run_on_args(lines, ["--from-last", "NoSuchKernel"])

    def test_a_step_cut_by_the_window_gives_the_one_before(self):
        # Two whole steps of three launches, then a third cut after its
        # first two (ncu's --launch-count): the second step is summed.
        def timed(kid, name, ns):
            return [f'"{kid}","1","batch_decode","h","{name}","1","13","(128, 1, 1)",'
                    f'"(8, 1, 1)","0","9.0","Command line profiler metrics",'
                    f'"gpu__time_duration.sum","ns","{ns:,}"']
        lines = ["==PROF== Connected to process 1", HEADER]
        kid = 0
        for step, count in [(0, 3), (1, 3), (2, 2)]:
            for name, ns in [("void ns::DequantRowsKernel(int)", 3000),
                             ("void ns::StreamGroupsKernel<4, 1>(ns::S)", 40000 + 1000 * step),
                             ("void ns::TopKKernel(int)", 6000)][:count]:
                lines += timed(kid, name, ns)
                kid += 1
        err = io.StringIO()
        with redirect_stderr(err):
            out = self.run_on_args(lines, ["--from-last", "DequantRowsKernel", "--by-kernel"])
        self.assertEqual(out[-1], "total 3 launches 50.0 us")  # 3 + 41 + 6, not 3 + 42
        self.assertIn("cut", err.getvalue())

    def run_on_args(self, lines, args):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write("\n".join(lines) + "\n")
        out = io.StringIO()
        try:
            with redirect_stdout(out):
                self.assertEqual(ncu_step.main([f.name] + args), 0)
        finally:
            os.unlink(f.name)
        return out.getvalue().splitlines()


if __name__ == "__main__":
    unittest.main()
