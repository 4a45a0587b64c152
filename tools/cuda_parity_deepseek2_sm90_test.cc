// deepseek2 on the CUDA backend against llama.cpp (needs a CUDA device and
// ../shared/goldens-deepseek2, found as //tools:parity_deepseek2_test finds
// it: SLUICE_GOLDENS_DEEPSEEK2, else beside SLUICE_GOLDENS; skips elsewhere
// with the marker tests/run_all.sh counts): the F32 gate on every prompt
// (max <= 0.005 of std, top-1 on every row), the slot cache's copy policy
// bit-identical to the all-resident run at 25% of the routed experts and at
// one slot, and each prompt inside a batch of other sequences within the
// gate. Every row goes through the batch pass (batch_pass.h): the fused
// decode program does not handle latent attention, so decode steps are
// one-token batch passes. Not yet run on a GPU.
#include <cstdio>
#include <string>

#include "base/testing/goldens.h"
#include "base/testing/skip.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"
#include "tools/cuda_parity_testing.h"
#include "tools/parity_lib.h"

namespace sluice::parity {
namespace {

constexpr char kModel[] = "deepseek2-micro-f32";
// The golden's blocks with routed experts (block 0 is a dense FFN).
constexpr int kMoeBlocks = 3;

TEST(CudaParityDeepseek2Test, PassesTheF32GateOnEveryPrompt) {
  SLUICE_REQUIRE_GOLDENS_DEEPSEEK2(dir);
  SLUICE_REQUIRE_DEVICE();
  Options options;
  options.backend = Backend::kCuda;
  auto report = RunParity(dir + "/" + kModel + ".gguf", dir, options);
  ASSERT_TRUE(report.ok()) << report.status();
  std::fputs(FormatReport({*report}).c_str(), stdout);
  EXPECT_TRUE(report->all_f32);
  ASSERT_EQ(report->prompts.size(), 3u);
  for (const PromptReport& p : report->prompts) {
    std::printf("measured %s on cuda: max |dlogit|/std = %.6f (gate %.3f), rms %.6f, "
                "top-1 %d/%d\n",
                p.name.c_str(), p.max, Gates{}.f32_max, p.rms, p.top1, p.rows);
    EXPECT_TRUE(p.passed) << p.name;
    EXPECT_LE(p.max, Gates{}.f32_max) << p.name;
    EXPECT_EQ(p.top1, p.rows) << p.name;
  }
}

// The streaming arm bit for bit against the resident one; the dense lead
// block has no routed experts: none looked up there.
void ExpectIdentical(const std::string& dir, const config::ExpertConfig& experts) {
  ModelReport report;
  parity::ExpectIdentical(dir, kModel, experts, &report);
  const auto& lookups = report.experts.counters.layer_lookups;
  ASSERT_EQ(lookups.size(), 4u);
  EXPECT_EQ(lookups[0], 0u);
  for (int il = 1; il < 4; ++il) EXPECT_GT(lookups[il], 0u) << il;
}

TEST(CudaParityDeepseek2Test, CopyPolicyAtAQuarterIsBitIdentical) {
  SLUICE_REQUIRE_GOLDENS_DEEPSEEK2(dir);
  SLUICE_REQUIRE_DEVICE();
  config::ExpertConfig experts;
  experts.arena_fraction = 0.25;
  ExpectIdentical(dir, experts);
}

TEST(CudaParityDeepseek2Test, CopyPolicyAtOneSlotIsBitIdentical) {
  SLUICE_REQUIRE_GOLDENS_DEEPSEEK2(dir);
  SLUICE_REQUIRE_DEVICE();
  config::ExpertConfig experts;
  experts.slots = 1;
  ExpectIdentical(dir, experts);
}

// Each prompt inside batches of 5 other sequences (several sequences'
// latent caches in one launch): its rows within the gate against the
// goldens and against the prompt alone, and each pass's MoE blocks
// acquiring the union of their rows' experts.
TEST(CudaParityDeepseek2Test, PromptInsideABatchPassesTheGate) {
  SLUICE_REQUIRE_GOLDENS_DEEPSEEK2(dir);
  SLUICE_REQUIRE_DEVICE();
  Options options;
  options.backend = Backend::kCuda;
  options.batch_with = 5;
  auto report = RunParity(dir + "/" + kModel + ".gguf", dir, options);
  ASSERT_TRUE(report.ok()) << report.status();
  std::fputs(FormatReport({*report}).c_str(), stdout);
  ASSERT_EQ(report->batched.size(), 3u);
  const ModelInfo& m = report->info;
  for (size_t i = 0; i < 3; ++i) {
    const PromptReport& p = report->prompts[i];
    EXPECT_TRUE(p.passed) << p.name << ": max=" << p.max << " top1=" << p.top1 << "/" << p.rows;
    const BatchedPrompt& b = report->batched[i];
    std::printf("%s batched vs alone: max=%g top1=%d/%d experts=%lld [%d, %d]\n", p.name.c_str(),
                b.vs_alone.max, b.vs_alone.top1, b.vs_alone.rows,
                static_cast<long long>(b.experts_acquired), b.min_layer_experts,
                b.max_layer_experts);
    EXPECT_TRUE(b.vs_alone.passed) << b.vs_alone.name;
    EXPECT_GE(b.min_layer_experts, m.n_expert_used);
    EXPECT_GT(b.max_layer_experts, m.n_expert_used);
    EXPECT_GE(b.experts_acquired, 33 * kMoeBlocks * b.min_layer_experts);
    EXPECT_LE(b.experts_acquired, 33 * kMoeBlocks * b.max_layer_experts);
  }
}

}  // namespace
}  // namespace sluice::parity
