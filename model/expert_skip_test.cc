#include "model/expert_skip.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "loader/model_files.h"
#include "model/engine.h"
#include "model/testing/mkmodel.h"

namespace sluice {
namespace {

// Resident exactly when (layer, expert) is in the set; counts the questions.
class FakeResidency final : public ExpertResidency {
 public:
  explicit FakeResidency(absl::flat_hash_set<int32_t> resident) : resident_(std::move(resident)) {}
  bool Resident(int64_t layer, int32_t expert) const override {
    ++asked;
    return resident_.contains(expert);
  }
  mutable int asked = 0;

 private:
  absl::flat_hash_set<int32_t> resident_;
};

Routing Route(std::vector<int32_t> ids, std::vector<float> weights) {
  Routing r{};
  for (size_t s = 0; s < ids.size(); ++s) {
    r.expert[s] = ids[s];
    r.weight[s] = weights[s];
  }
  return r;
}

TEST(SkipColdExpertsTest, DropsLightColdExpertsAndRenormalisesToTheSameSum) {
  // Threshold 0.2: 3 is the top; 5 is light but resident (kept); 7 is cold
  // but heavy enough (kept, never asked); 2 and 6 are light and cold.
  std::vector<Routing> routes = {
      Route({3, 5, 7, 2, 6}, {0.4f, 0.1f, 0.25f, 0.125f, 0.125f})};
  const FakeResidency oracle({5});
  EXPECT_EQ(SkipColdExperts(0, 8, 5, 0.2, oracle, absl::MakeSpan(routes)), 2);
  const Routing& r = routes[0];
  EXPECT_EQ(r.expert[0], 3);
  EXPECT_EQ(r.expert[1], 5);
  EXPECT_EQ(r.expert[2], 7);
  EXPECT_EQ(r.expert[3], kSkippedExpert);
  EXPECT_EQ(r.expert[4], kSkippedExpert);
  // 0.75 of the sum 1 kept: the three scaled by 1 / 0.75.
  EXPECT_FLOAT_EQ(r.weight[0], 0.4f / 0.75f);
  EXPECT_FLOAT_EQ(r.weight[1], 0.1f / 0.75f);
  EXPECT_FLOAT_EQ(r.weight[2], 0.25f / 0.75f);
  EXPECT_EQ(r.weight[3], 0.0f);
  EXPECT_EQ(r.weight[4], 0.0f);
  // Only the light candidates (5, 2, 6) were asked, once each.
  EXPECT_EQ(oracle.asked, 3);
}

// One token's ids and weights in two arrays (the CUDA backend's layout):
// the same choice and weights as the Routing form, the skipped ids listed
// after any already there, the ids untouched; nothing skipped leaves the
// weights' bits.
TEST(SkipColdExpertsTest, OneTokenInTwoArraysGivesTheSameChoice) {
  const int32_t ids[5] = {3, 5, 7, 2, 6};
  float weights[5] = {0.4f, 0.1f, 0.25f, 0.125f, 0.125f};
  std::vector<int32_t> skipped = {42};
  EXPECT_EQ(SkipColdExpertsOfToken(0, 8, 5, 0.2, FakeResidency({5}), ids, weights, &skipped),
            2);
  EXPECT_EQ(skipped, (std::vector<int32_t>{42, 2, 6}));
  EXPECT_EQ(ids[3], 2);
  EXPECT_FLOAT_EQ(weights[0], 0.4f / 0.75f);
  EXPECT_FLOAT_EQ(weights[1], 0.1f / 0.75f);
  EXPECT_FLOAT_EQ(weights[2], 0.25f / 0.75f);
  EXPECT_EQ(weights[3], 0.0f);
  EXPECT_EQ(weights[4], 0.0f);
  float kept[5] = {0.4f, 0.1f, 0.25f, 0.125f, 0.125f};
  std::vector<int32_t> none;
  EXPECT_EQ(SkipColdExpertsOfToken(0, 8, 5, 0.2, FakeResidency({2, 5, 6}), ids, kept, &none), 0);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(kept[3], 0.125f);
  EXPECT_EQ(kept[0], 0.4f);
}

TEST(SkipColdExpertsTest, KeepsTheSumOfScaledWeights) {
  // deepseek2's weights_scale: the shares decide, the sum is kept.
  std::vector<Routing> routes = {Route({1, 2, 3}, {1.5f, 0.75f, 0.25f})};
  const FakeResidency none({});
  EXPECT_EQ(SkipColdExperts(0, 4, 3, 0.2, none, absl::MakeSpan(routes)), 1);
  EXPECT_EQ(routes[0].expert[2], kSkippedExpert);
  EXPECT_FLOAT_EQ(routes[0].weight[0] + routes[0].weight[1], 2.5f);
}

TEST(SkipColdExpertsTest, NeverDropsTheTopExpert) {
  // Every weight below the threshold, nothing resident: the largest stays,
  // wherever its slot (forced routing can put it anywhere).
  std::vector<Routing> routes = {Route({4, 6, 1, 0}, {0.25f, 0.25f, 0.3f, 0.2f}),
                                 Route({2, 3, 5, 7}, {0.4f, 0.2f, 0.2f, 0.2f})};
  const FakeResidency none({});
  EXPECT_EQ(SkipColdExperts(1, 8, 4, 0.99, none, absl::MakeSpan(routes)), 6);
  EXPECT_EQ(routes[0].expert[2], 1);
  EXPECT_EQ(routes[0].weight[2], 1.0f);
  EXPECT_EQ(routes[1].expert[0], 2);
  EXPECT_EQ(routes[1].weight[0], 1.0f);
  for (int s : {0, 1, 3}) EXPECT_EQ(routes[0].expert[s], kSkippedExpert) << s;
  for (int s : {1, 2, 3}) EXPECT_EQ(routes[1].expert[s], kSkippedExpert) << s;
}

TEST(SkipColdExpertsTest, ThresholdZeroTouchesNothingAndAsksNothing) {
  std::vector<Routing> routes = {Route({3, 5}, {0.75f, 0.25f})};
  const FakeResidency none({});
  EXPECT_EQ(SkipColdExperts(0, 8, 2, 0, none, absl::MakeSpan(routes)), 0);
  EXPECT_EQ(routes[0].expert[1], 5);
  EXPECT_EQ(routes[0].weight[1], 0.25f);
  EXPECT_EQ(none.asked, 0);
}

TEST(SampledPagesResidentTest, TouchedHeapPagesAreResident) {
  std::vector<uint8_t> bytes(1 << 20, 1);
  EXPECT_TRUE(SampledPagesResident(bytes.data(), bytes.size()));
  EXPECT_TRUE(SampledPagesResident(nullptr, 0));
}

// The whole CPU pass on a generated model.
class ExpertSkipEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* dir = std::getenv("TEST_TMPDIR");
    const std::string path = absl::StrCat(dir != nullptr ? dir : "/tmp", "/expert_skip.gguf");
    mkmodel::Options o;
    o.arch = mkmodel::Arch::kQwen3Moe;
    o.shape = *mkmodel::NamedShape(o.arch, "micro");
    o.seed = 5;
    ASSERT_TRUE(mkmodel::WriteModel(o, path).ok());
    auto files = ModelFiles::Open(path);
    ASSERT_TRUE(files.ok()) << files.status();
    files_ = files->release();
  }
  static void TearDownTestSuite() { delete files_; }

  // Every row's logits of a fixed prompt, then of one decoded token (the
  // single-token path), and the engine's skipped count.
  struct Pass {
    std::vector<float> prefill, decode;
    uint64_t skipped = 0;
  };
  static Pass Run(double threshold, const ExpertResidency* residency) {
    EngineOptions options{.threads = 2, .context_length = 64};
    options.experts.skip_threshold = threshold;
    options.expert_residency = residency;
    Pass p;
    auto engine = Engine::Create(*files_, options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return p;
    auto session = (*engine)->NewSession();
    EXPECT_TRUE(session.ok());
    const std::vector<int32_t> prompt = {1, 5, 9, 17, 33, 2, 8, 40};
    EXPECT_TRUE((*session)->PrefillAll(prompt, &p.prefill).ok());
    EXPECT_TRUE((*session)->Decode(12, &p.decode).ok());
    p.skipped = (*engine)->model().ExpertStats().counters.skipped;
    return p;
  }
  static ModelFiles* files_;
};
ModelFiles* ExpertSkipEngineTest::files_ = nullptr;

TEST_F(ExpertSkipEngineTest, ThresholdZeroChangesNoLogitBit) {
  const FakeResidency none({});
  const Pass off = Run(0, nullptr);
  const Pass zero = Run(0, &none);
  ASSERT_FALSE(off.prefill.empty());
  EXPECT_EQ(zero.prefill, off.prefill);
  EXPECT_EQ(zero.decode, off.decode);
  EXPECT_EQ(zero.skipped, 0u);
  EXPECT_EQ(none.asked, 0);
}

TEST_F(ExpertSkipEngineTest, EverythingResidentChangesNoLogitBit) {
  // All experts "in RAM": the mode is on but nothing qualifies.
  absl::flat_hash_set<int32_t> all;
  for (int32_t e = 0; e < 1024; ++e) all.insert(e);
  const FakeResidency everything(std::move(all));
  const Pass off = Run(0, nullptr);
  const Pass on = Run(0.5, &everything);
  EXPECT_EQ(on.prefill, off.prefill);
  EXPECT_EQ(on.decode, off.decode);
  EXPECT_EQ(on.skipped, 0u);
  EXPECT_GT(everything.asked, 0);
}

TEST_F(ExpertSkipEngineTest, ColdExpertsAreSkippedCountedAndChangeTheLogits) {
  const FakeResidency none({});
  const Pass off = Run(0, nullptr);
  const Pass on = Run(0.99, &none);  // everything but each token's top expert
  EXPECT_GT(on.skipped, 0u);
  EXPECT_NE(on.prefill, off.prefill);
  float max_diff = 0;
  for (size_t i = 0; i < on.prefill.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(on.prefill[i] - off.prefill[i]));
  }
  std::printf("skipped %llu; max |logit difference| %.4g\n",
              static_cast<unsigned long long>(on.skipped), max_diff);
}

}  // namespace
}  // namespace sluice
