// Logit parity with llama.cpp on every golden model and prompt (6 models x 3
// prompts), plus the metric and gate arithmetic on hand-made rows.
#include "tools/parity_lib.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "base/testing/goldens.h"
#include "gtest/gtest.h"

namespace sluice::parity {
namespace {

TEST(ParityMetricsTest, CompareRowAndStd) {
  const float ours[4] = {1.0f, 2.5f, 0.0f, -1.0f};
  const float ref[4] = {1.0f, 2.0f, 3.0f, -1.0f};
  const RowStats r = CompareRow(ours, ref, 4);
  EXPECT_DOUBLE_EQ(r.max_abs, 3.0);
  EXPECT_DOUBLE_EQ(r.sum_sq, 0.25 + 9.0);
  EXPECT_FALSE(r.top1_agree);  // argmax 1 vs 2
  const float v[4] = {1, 3, 1, 3};
  EXPECT_DOUBLE_EQ(StdDev(v), 1.0);
}

TEST(ParityMetricsTest, SummarizeDividesByStdAndAppliesGates) {
  std::vector<RowStats> rows(4);
  for (int i = 0; i < 4; ++i) {
    rows[i].max_abs = 0.01 * (i + 1);  // 0.01 .. 0.04
    rows[i].sum_sq = 0.0001 * 10;      // each of 10 values off by 0.01
    rows[i].top1_agree = true;
  }
  PromptReport p = Summarize("m.p1", rows, 10, /*std=*/2.0, /*all_f32=*/false,
                             Gates{});
  EXPECT_DOUBLE_EQ(p.max, 0.02);
  EXPECT_NEAR(p.rms, 0.005, 1e-12);
  EXPECT_DOUBLE_EQ(p.median, 0.0125);  // (0.02 + 0.03) / 2, over std 2
  EXPECT_EQ(p.top1, 4);
  EXPECT_TRUE(p.passed);
  // F32 gate: max 0.02 > 0.005 fails.
  EXPECT_FALSE(Summarize("m.p1", rows, 10, 2.0, true, Gates{}).passed);
  // One disagreeing row of four is 75% < 95%.
  rows[0].top1_agree = false;
  EXPECT_FALSE(Summarize("m.p1", rows, 10, 2.0, false, Gates{}).passed);
}

TEST(ParityMetricsTest, FlagsOnlyTighten) {
  Gates loose;
  loose.f32_max = 1;
  loose.quant_rms = 1;
  loose.quant_median = 1;
  loose.quant_top1 = 0.5;
  const Gates g = Tighten(loose);
  EXPECT_EQ(g.f32_max, 0.005);
  EXPECT_EQ(g.quant_rms, 0.03);
  EXPECT_EQ(g.quant_median, 0.15);
  EXPECT_EQ(g.quant_top1, 0.95);
  Gates tight;
  tight.f32_max = 0.001;
  tight.quant_top1 = 1.0;
  EXPECT_EQ(Tighten(tight).f32_max, 0.001);
  EXPECT_EQ(Tighten(tight).quant_top1, 1.0);
}

TEST(ParityMetricsTest, FormatEndsWithTheSummaryLine) {
  ModelReport m;
  m.model = "x";
  PromptReport p;
  p.name = "x.p1";
  p.rows = 2;
  p.max = 0.5;
  p.rms = 0.25;
  p.median = 0.125;
  p.top1 = 1;
  m.prompts.push_back(p);
  const std::string text = FormatReport({m});
  const std::string last = "worst_max=0.500000 worst_rms=0.250000 "
                           "worst_median=0.125000 top1_agree=1/2\n";
  ASSERT_GE(text.size(), last.size());
  EXPECT_EQ(text.substr(text.size() - last.size()), last);
}

class GoldenParityTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenParityTest, PassesItsGate) {
  SLUICE_REQUIRE_GOLDENS(dir);
  const std::string name = GetParam();
  Options options;
  options.threads = 2;
  auto report = RunParity(dir + "/" + name + ".gguf", dir, options);
  ASSERT_TRUE(report.ok()) << report.status();
  std::fputs(FormatReport({*report}).c_str(), stdout);
  ASSERT_EQ(report->prompts.size(), 3u);
  for (const PromptReport& p : report->prompts) {
    EXPECT_TRUE(p.passed) << p.name << ": max=" << p.max << " rms=" << p.rms
                          << " median=" << p.median << " top1=" << p.top1
                          << "/" << p.rows;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Goldens, GoldenParityTest,
    ::testing::Values("qwen3moe-micro-f32", "qwen3moe-tiny-q8_0",
                      "qwen3moe-tiny-mixed", "qwen35moe-micro-f32",
                      "qwen35moe-tiny-q8_0", "qwen35moe-tiny-mixed"),
    [](const auto& info) {
      std::string n = info.param;
      for (char& c : n) {
        if (c == '-') c = '_';
      }
      return n;
    });

// Each golden prompt computed inside batches of 5 other sequences (their
// prompts, decodes and prefill chunks beside its prefill and each of its
// decode tokens, one ForwardBatch a step): its rows pass the F32 gate and
// are bit-identical to the prompt alone, and the batched passes acquired
// the union of their rows' experts.
class BatchedParityTest : public ::testing::TestWithParam<const char*> {};

TEST_P(BatchedParityTest, PromptInsideABatchPassesAndEqualsItAlone) {
  SLUICE_REQUIRE_GOLDENS(dir);
  Options options;
  options.threads = 2;
  options.batch_with = 5;
  auto report = RunParity(dir + "/" + GetParam() + ".gguf", dir, options);
  ASSERT_TRUE(report.ok()) << report.status();
  std::fputs(FormatReport({*report}).c_str(), stdout);
  ASSERT_EQ(report->prompts.size(), 3u);
  ASSERT_EQ(report->batched.size(), 3u);
  EXPECT_TRUE(report->all_f32);
  for (size_t i = 0; i < 3; ++i) {
    const PromptReport& p = report->prompts[i];
    EXPECT_TRUE(p.passed) << p.name << ": max=" << p.max << " top1=" << p.top1
                          << "/" << p.rows;
    EXPECT_EQ(p.rows, p.n_prompt + 32) << p.name;
    const BatchedPrompt& b = report->batched[i];
    EXPECT_EQ(b.vs_alone.rows, p.rows);
    EXPECT_EQ(b.vs_alone.max, 0.0) << b.vs_alone.name;
    EXPECT_EQ(b.vs_alone.top1, b.vs_alone.rows);
    EXPECT_EQ(b.others, 5);
    EXPECT_EQ(b.passes, 33);
    // Its own rows and at least one row of each other sequence per pass.
    EXPECT_GE(b.rows, p.n_prompt + 32 + 5 * 33);
    // Each MoE layer of each pass acquired the union of its rows' experts:
    // at least one row's k, at most every expert.
    const ModelInfo& m = report->info;
    EXPECT_GE(b.min_layer_experts, m.n_expert_used);
    EXPECT_LE(b.max_layer_experts, m.n_expert);
    EXPECT_GE(b.experts_acquired, 33 * m.n_layer * b.min_layer_experts);
    EXPECT_LE(b.experts_acquired, 33 * m.n_layer * b.max_layer_experts);
  }
  EXPECT_TRUE(report->passed);
}

INSTANTIATE_TEST_SUITE_P(MicroF32, BatchedParityTest,
                         ::testing::Values("qwen3moe-micro-f32", "qwen35moe-micro-f32"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

// The split set, opened from its first shard, gives the unsplit file's
// logits (llama.cpp's were bitwise identical; split_verification.json).
TEST(GoldenParitySplitTest, SplitShardsMatchTheUnsplitGoldens) {
  SLUICE_REQUIRE_GOLDENS(dir);
  Options options;
  options.golden_name = "qwen3moe-tiny-q8_0";
  auto report = RunParity(
      dir + "/split/qwen3moe-tiny-q8_0-00001-of-00003.gguf", dir, options);
  ASSERT_TRUE(report.ok()) << report.status();
  std::fputs(FormatReport({*report}).c_str(), stdout);
  EXPECT_TRUE(report->passed);
}

}  // namespace
}  // namespace sluice::parity
