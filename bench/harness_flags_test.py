"""harness.py's llama.cpp build flags: read from a build's CMakeCache.txt
when no FLAGS file lies beside llama-bench."""
import argparse
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

CACHE = """# This is the CMakeCache file.
CMAKE_BUILD_TYPE:STRING=Release
GGML_CUDA:BOOL=ON
GGML_NATIVE:BOOL=ON
//The CUDA architectures
CMAKE_CUDA_ARCHITECTURES:STRING=90a
GGML_CUDA_FA:BOOL=ON
GGML_BLAS:BOOL=OFF
"""


class LlamaFlagsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.bin = os.path.join(self.dir, "bin")
        os.mkdir(self.bin)

    def args(self, flags=""):
        return argparse.Namespace(llama=self.bin, llama_flags=flags)

    def test_the_cmake_cache_gives_the_comparison_flags_in_order(self):
        with open(os.path.join(self.dir, "CMakeCache.txt"), "w") as f:
            f.write(CACHE)
        self.assertEqual(harness.llama_flags(self.args()),
                         "-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=ON "
                         "-DCMAKE_CUDA_ARCHITECTURES=90a -DGGML_CUDA_FA=ON")

    def test_a_flags_file_and_the_flag_come_first(self):
        with open(os.path.join(self.dir, "CMakeCache.txt"), "w") as f:
            f.write(CACHE)
        with open(os.path.join(self.bin, "FLAGS"), "w") as f:
            f.write("from the file\n")
        self.assertEqual(harness.llama_flags(self.args()), "from the file")
        self.assertEqual(harness.llama_flags(self.args("given")), "given")

    def test_no_cache_no_flags(self):
        self.assertEqual(harness.llama_flags(self.args()), "")


class KernelSwitchesTest(unittest.TestCase):
    def test_only_the_cuda_switches_are_recorded_sorted(self):
        env = {"SLUICE_CUDA_DOWN_ROWS": "8", "PATH": "/bin", "SLUICE_API_KEY": "secret",
               "SLUICE_CUDA_PROJECT_ONE_ROW": "0"}
        self.assertEqual(list(harness.kernel_switches(env).items()),
                         [("SLUICE_CUDA_DOWN_ROWS", "8"), ("SLUICE_CUDA_PROJECT_ONE_ROW", "0")])
        self.assertEqual(harness.kernel_switches({"PATH": "/bin"}), {})


if __name__ == "__main__":
    unittest.main()
