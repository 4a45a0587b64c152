"""ncu_step.py on a small ncu CSV written here: the last launches, their
figures and the sum."""
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

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


if __name__ == "__main__":
    unittest.main()
