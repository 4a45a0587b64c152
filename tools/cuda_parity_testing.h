// Shared by the CUDA parity tests (cuda_parity_sm90_test,
// cuda_parity_deepseek2_sm90_test): skipping without a device, and the
// streaming arm checked bit for bit against the all-resident arm.
#ifndef SLUICE_TOOLS_CUDA_PARITY_TESTING_H_
#define SLUICE_TOOLS_CUDA_PARITY_TESTING_H_

#include <cmath>
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

// `model` (a .gguf under `dir`, with its goldens) on the CUDA backend with
// `experts` against its all-resident arm.
inline absl::StatusOr<ModelReport> AgainstResident(const std::string& dir,
                                                   const std::string& model,
                                                   const config::ExpertConfig& experts) {
  Options options;
  options.backend = Backend::kCuda;
  options.compare = Backend::kCuda;
  options.experts = experts;
  return RunParity(dir + "/" + model + ".gguf", dir, options);
}

// The streaming arm against the all-resident arm (AgainstResident), row by
// row: max |delta| must be exactly 0 on every prompt, and experts must have
// streamed and missed. `out`, when set, receives the report.
inline void ExpectIdentical(const std::string& dir, const std::string& model,
                            const config::ExpertConfig& experts, ModelReport* out = nullptr) {
  auto report = AgainstResident(dir, model, experts);
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

// --expert_skip on the device, threshold 0.99 with a quarter of the
// experts on the device: with every expert in memory
// (no host tier) nothing is skipped and the copy policy's bits hold; with a
// host tier of one layer's worth, the rest only on disk, decode steps skip
// cold experts (counted) and every logit stays finite.
// host_share: the model decodes through the fused program, where a miss
// policy gives the host a share; then once more with the host policy.
inline void ExpectSkipsOnlyOffMemory(const std::string& dir, const std::string& model,
                                     bool host_share) {
  config::ExpertConfig experts;
  experts.arena_fraction = 0.25;
  experts.skip_threshold = 0.99;
  ModelReport in_memory;
  ExpectIdentical(dir, model, experts, &in_memory);
  EXPECT_TRUE(in_memory.experts.skipping);
  EXPECT_EQ(in_memory.experts.counters.skipped, 0u);
  // The smallest host tier the model takes: one layer's experts (the
  // tiny mixed models' slices, read as 4096-aligned spans, are larger than
  // a device slot's share; run 15 refused an estimate from the slot).
  ASSERT_GT(in_memory.experts.host_tier_min_bytes, 0u);
  experts.host_tier_bytes = in_memory.experts.host_tier_min_bytes;
  auto report = AgainstResident(dir, model, experts);
  ASSERT_TRUE(report.ok()) << report.status();
  std::printf("skipped %llu of %llu lookups\n",
              static_cast<unsigned long long>(report->experts.counters.skipped),
              static_cast<unsigned long long>(report->experts.counters.lookups));
  EXPECT_GT(report->experts.counters.skipped, 0u);
  ASSERT_EQ(report->comparisons.size(), 3u);
  for (const PromptReport& c : report->comparisons) {
    std::printf("%s skipping vs resident: rows=%d max=%g top1=%d\n", c.name.c_str(), c.rows,
                c.max, c.top1);
    EXPECT_TRUE(std::isfinite(c.max)) << c.name;
    EXPECT_GT(c.rows, 0) << c.name;
  }
  if (!host_share) return;
  // With the host computing the misses it takes (their results placed by
  // routing slot, which the skipped ones leave out of the acquire).
  config::ExpertConfig host = experts;
  host.miss_policy = config::MissPolicy::kHost;
  auto on_host = AgainstResident(dir, model, host);
  ASSERT_TRUE(on_host.ok()) << on_host.status();
  EXPECT_GT(on_host->experts.counters.skipped, 0u);
  EXPECT_GT(on_host->experts.counters.host_computed, 0u);
  ASSERT_EQ(on_host->comparisons.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const PromptReport& c = on_host->comparisons[i];
    std::printf("%s skipping, host misses vs resident: max=%g (copy: %g)\n", c.name.c_str(),
                c.max, report->comparisons[i].max);
    EXPECT_TRUE(std::isfinite(c.max)) << c.name;
  }
}

}  // namespace sluice::parity

#endif  // SLUICE_TOOLS_CUDA_PARITY_TESTING_H_
