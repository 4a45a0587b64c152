// Shared by the CUDA parity tests (cuda_parity_sm90_test,
// cuda_parity_deepseek2_sm90_test): skipping without a device, and the
// streaming arm checked bit for bit against the all-resident arm.
#ifndef SLUICE_TOOLS_CUDA_PARITY_TESTING_H_
#define SLUICE_TOOLS_CUDA_PARITY_TESTING_H_

#include <cstdio>
#include <string>
#include <utility>

#include "base/testing/skip.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"
#include "tools/parity_lib.h"

// Skips the test (with the marker tests/run_all.sh counts) without a device.
#define SLUICE_REQUIRE_DEVICE()                                 \
  do {                                                          \
    if (absl::Status s_ = ::sluice::cuda::SetDevice(0); !s_.ok()) { \
      SLUICE_SKIP("no CUDA device here: " + s_.ToString());     \
    }                                                           \
  } while (false)

namespace sluice::parity {

// The streaming arm of `model` (a .gguf under `dir`, with its goldens) with
// `experts` against the all-resident arm, row by row: max |delta| must be
// exactly 0 on every prompt, and experts must have streamed and missed.
// `out`, when set, receives the report.
inline void ExpectIdentical(const std::string& dir, const std::string& model,
                            const config::ExpertConfig& experts, ModelReport* out = nullptr) {
  Options options;
  options.backend = Backend::kCuda;
  options.compare = Backend::kCuda;
  options.experts = experts;
  auto report = RunParity(dir + "/" + model + ".gguf", dir, options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->comparisons.size(), 3u);
  for (const PromptReport& c : report->comparisons) {
    std::printf("%s streaming vs resident: rows=%d max=%g\n", c.name.c_str(), c.rows, c.max);
    EXPECT_EQ(c.max, 0.0) << c.name;
    EXPECT_EQ(c.top1, c.rows) << c.name;
  }
  EXPECT_TRUE(report->experts.streaming);
  EXPECT_GT(report->experts.counters.misses, 0u);
  if (out != nullptr) *out = *std::move(report);
}

}  // namespace sluice::parity

#endif  // SLUICE_TOOLS_CUDA_PARITY_TESTING_H_
