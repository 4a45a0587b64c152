"""batch_ab.py against a fake batch_decode (bench/testdata): the arms'
order, the flags passed, the table and the ratios, and the errors."""
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import batch_ab  # noqa: E402

FAKE = os.path.join(HERE, "testdata", "fake_batch_decode.py")


class BatchAbTest(unittest.TestCase):
    def setUp(self):
        fd, self.log = tempfile.mkstemp(suffix=".log")
        os.close(fd)
        os.environ["FAKE_LOG"] = self.log

    def tearDown(self):
        os.unlink(self.log)
        for var in ("FAKE_LOG", "FAKE_FAIL"):
            os.environ.pop(var, None)

    def run_main(self, argv):
        out = io.StringIO()
        with redirect_stdout(out):
            self.assertEqual(batch_ab.main(argv), 0)
        return out.getvalue().splitlines()

    def test_arms_alternate_and_the_table_says_so(self):
        out = self.run_main(["--bin", FAKE, "--model", "m.gguf", "--sequences", "4,8",
                             "--arm", "base=FAKE_ARM=base",
                             "--arm", "fast=FAKE_ARM=fast,FAKE_FAST=1",
                             "--", "--threads", "16"])
        self.assertEqual(out, [
            "| arm | 4 | 8 |",
            "|---|---|---|",
            "| base | 400.0 / 400.0 | 800.0 / 800.0 |",
            "| fast | 440.0 / 440.0 | 880.0 / 880.0 |",
            "| fast against base | +10.0% | +10.0% |",
        ])
        with open(self.log) as f:
            runs = f.read().splitlines()
        self.assertEqual([r.split()[0] for r in runs], ["base", "fast", "base", "fast"])
        self.assertEqual(runs[0].split()[1:], [
            "--model", "m.gguf", "--json", "--backend", "cuda", "--prompt_tokens", "128",
            "--decode_tokens", "32", "--sequences", "4,8", "--threads", "16"])

    def test_an_arm_of_the_environment_as_it_is(self):
        self.assertEqual(batch_ab.parse_arm("new="), ("new", {}))
        self.assertEqual(batch_ab.parse_arm("off=A=0,B=1"), ("off", {"A": "0", "B": "1"}))

    def test_bad_arms_and_failed_runs_are_errors(self):
        for bad in ("noequals", "=A=1", "x=A"):
            with self.assertRaises(ValueError):
                batch_ab.parse_arm(bad)
        with self.assertRaises(ValueError):
            batch_ab.main(["--bin", FAKE, "--model", "m", "--arm", "a=", "--arm", "a=X=1"])
        with self.assertRaises(RuntimeError):
            batch_ab.main(["--bin", FAKE, "--model", "m", "--arm", "a=FAKE_FAIL=1"])


if __name__ == "__main__":
    unittest.main()
