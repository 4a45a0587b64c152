#include "model/sampler.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;

std::vector<float> LogOf(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (const double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

// How often each id is drawn in `n` samples.
std::vector<int> Histogram(Sampler& s, const std::vector<float>& logits,
                           int n) {
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) ++counts[s.Sample(logits)];
  return counts;
}

void ExpectInvalid(SamplerParams p, const std::string& message) {
  const absl::Status status = ValidateSamplerParams(p);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), message);
}

TEST(ValidateSamplerParamsTest, NamesTheFieldAndValue) {
  EXPECT_TRUE(ValidateSamplerParams(SamplerParams{}).ok());
  SamplerParams p;
  p.temperature = -0.5f;
  ExpectInvalid(p, "sampler: temperature = -0.5 is outside [0, inf)");
  p = {};
  p.temperature = std::nanf("");
  ExpectInvalid(p, "sampler: temperature = nan is outside [0, inf)");
  p = {};
  p.top_k = -1;
  ExpectInvalid(p, "sampler: top_k = -1 is outside [0, inf)");
  p = {};
  p.top_p = 0;
  ExpectInvalid(p, "sampler: top_p = 0 is outside (0, 1]");
  p.top_p = 1.5f;
  ExpectInvalid(p, "sampler: top_p = 1.5 is outside (0, 1]");
  p = {};
  p.min_p = -0.25f;
  ExpectInvalid(p, "sampler: min_p = -0.25 is outside [0, 1]");
  p = {};
  p.repetition_penalty = 0;
  ExpectInvalid(p, "sampler: repetition_penalty = 0 is outside (0, inf)");
  p = {};
  p.repetition_window = -3;
  ExpectInvalid(p, "sampler: repetition_window = -3 is outside [0, inf)");
}

TEST(SamplerTest, GreedyPicksArgmaxAndLowestIdOnTies) {
  Sampler s(SamplerParams{});
  EXPECT_EQ(s.Sample(std::vector<float>{0.1f, 2.5f, -1.f, 2.4f}), 1);
  EXPECT_EQ(s.Sample(std::vector<float>{1.f, 3.f, 3.f, 3.f}), 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(s.Sample(std::vector<float>{nan, -5.f, nan}), 1);
  EXPECT_EQ(s.Sample(std::vector<float>{}), -1);
}

TEST(SamplerTest, TopKOneIsGreedyForEverySeed) {
  const std::vector<float> logits = {0.3f, 1.2f, 1.1f, -0.4f, 1.19f};
  for (uint64_t seed = 0; seed < 50; ++seed) {
    SamplerParams p;
    p.temperature = 1.5f;
    p.top_k = 1;
    p.seed = seed;
    Sampler s(p);
    EXPECT_EQ(s.Sample(logits), 1) << "seed " << seed;
  }
}

TEST(SamplerTest, SameSeedSameSequenceOtherSeedOtherSequence) {
  const std::vector<float> logits(16, 0.0f);  // uniform over 16 ids
  const auto run = [&](uint64_t seed) {
    SamplerParams p;
    p.temperature = 1;
    p.seed = seed;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 12; ++i) out.push_back(s.Sample(logits));
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
  // The exact sequence is part of the contract (platform independent).
  EXPECT_THAT(run(42), ElementsAre(11, 2, 4, 5, 0, 13, 3, 12, 5, 9, 3, 7));
}

TEST(SamplerTest, DrawsFollowTheSoftmax) {
  SamplerParams p;
  p.temperature = 1;
  p.seed = 7;
  Sampler s(p);
  const std::vector<int> counts =
      Histogram(s, LogOf({0.1, 0.2, 0.3, 0.4}), 10000);
  // Each count is within 4 standard deviations of 10000 * p ...
  const double probs[] = {0.1, 0.2, 0.3, 0.4};
  for (int i = 0; i < 4; ++i) {
    const double mean = 10000 * probs[i];
    const double sd = std::sqrt(10000 * probs[i] * (1 - probs[i]));
    EXPECT_NEAR(counts[i], mean, 4 * sd) << "id " << i;
  }
  // ... and exactly these for seed 7.
  EXPECT_THAT(counts, ElementsAre(965, 2017, 3018, 4000));
}

TEST(SamplerTest, TemperatureSharpensAndFlattens) {
  const std::vector<float> logits = {1.0f, 2.0f};
  SamplerParams p;
  p.seed = 3;
  p.temperature = 0.05f;  // p(1) = 1 / (1 + e^-20)
  Sampler cold(p);
  EXPECT_THAT(Histogram(cold, logits, 1000), ElementsAre(0, 1000));
  p.temperature = 100.0f;  // p(1) = 1 / (1 + e^-0.01), about one half
  Sampler hot(p);
  const std::vector<int> counts = Histogram(hot, logits, 10000);
  EXPECT_NEAR(counts[1], 5025, 200);
}

TEST(SamplerTest, TopPKeepsTheSmallestPrefixReachingP) {
  SamplerParams p;
  p.temperature = 1;
  // 0.5 + 0.3 reaches 0.75: ids 0 and 1 only. (Not 0.8 exactly: rounded
  // log-probabilities may sum to just below it.)
  p.top_p = 0.75f;
  p.seed = 11;
  Sampler s(p);
  const std::vector<int> counts =
      Histogram(s, LogOf({0.5, 0.3, 0.15, 0.05}), 4000);
  EXPECT_EQ(counts[2] + counts[3], 0);
  // Renormalized: 0.625 / 0.375.
  EXPECT_NEAR(counts[0], 2500, 150);
}

TEST(SamplerTest, MinPDropsTokensBelowAFractionOfTheBest) {
  SamplerParams p;
  p.temperature = 1;
  p.min_p = 0.2f;  // threshold 0.2 * 0.5 = 0.1: id 3 (0.05) goes
  p.seed = 5;
  Sampler s(p);
  const std::vector<int> counts =
      Histogram(s, LogOf({0.5, 0.3, 0.15, 0.05}), 4000);
  EXPECT_EQ(counts[3], 0);
  EXPECT_GT(counts[2], 0);
}

TEST(SamplerTest, TopKRestrictsToTheKBest) {
  SamplerParams p;
  p.temperature = 1;
  p.top_k = 2;
  p.seed = 9;
  Sampler s(p);
  const std::vector<int> counts =
      Histogram(s, LogOf({0.2, 0.1, 0.4, 0.3}), 2000);
  EXPECT_EQ(counts[0] + counts[1], 0);
  EXPECT_GT(counts[2], counts[3]);
}

TEST(SamplerTest, RepetitionPenaltyLowersRecentTokens) {
  SamplerParams p;
  p.repetition_penalty = 1.5f;
  Sampler s(p);
  const std::vector<float> positive = {2.0f, 1.9f, -1.0f};
  EXPECT_EQ(s.Sample(positive), 0);
  s.Accept(0);
  s.Accept(0);  // counted once: 2.0 / 1.5 = 1.33 < 1.9
  EXPECT_EQ(s.Sample(positive), 1);
  // Negative logits are multiplied: -1.0 * 1.5 = -1.5 < -1.2.
  EXPECT_EQ(s.Sample(std::vector<float>{-1.0f, -1.2f}), 1);
}

TEST(SamplerTest, RepetitionWindowForgetsOldTokens) {
  SamplerParams p;
  p.repetition_penalty = 1.5f;
  p.repetition_window = 1;
  Sampler s(p);
  s.Accept(0);
  s.Accept(2);  // pushes 0 out of the window
  EXPECT_EQ(s.Sample(std::vector<float>{2.0f, 1.9f, 0.5f}), 0);
  p.repetition_window = 0;
  Sampler off(p);
  off.Accept(0);
  EXPECT_EQ(off.Sample(std::vector<float>{2.0f, 1.9f}), 0);
}

TEST(SamplerGrammarTest, DrawsOnlyWhatTheGrammarAllowsAndCommitsIt) {
  // Tokens: 0 end, 1 "a", 2 "b", 3 "ab", 4 "c".
  auto vocab = TokenVocab::FromPieces({"", "a", "b", "ab", "c"}, {0});
  auto grammar = Grammar::Parse(R"(root ::= "a" "b"+)");
  ASSERT_TRUE(grammar.ok());
  for (const float temperature : {0.0f, 1.0f}) {
    SamplerParams p;
    p.temperature = temperature;
    p.seed = 3;
    p.grammar = TokenGrammar::Create(*grammar, vocab);
    Sampler s(p);
    // "c" is by far the likeliest token and never allowed; the end only once
    // "ab" is written.
    const std::vector<float> logits = {5, 0, 0, 0, 9};
    std::string text;
    for (int i = 0; i < 20 && !s.GrammarFinished(); ++i) {
      const int32_t id = s.Sample(logits);
      ASSERT_GE(id, 0);
      ASSERT_NE(id, 4);
      if (id == 0) break;
      text += vocab->piece(id);
    }
    EXPECT_TRUE((*grammar)->Matches(text)) << text;
    EXPECT_TRUE(s.GrammarFinished());
  }
}

TEST(SamplerGrammarTest, NothingAllowedIsMinusOne) {
  // The grammar wants "x", which no token spells.
  auto vocab = TokenVocab::FromPieces({"a", "b"}, {});
  auto grammar = Grammar::Parse(R"(root ::= "x")");
  ASSERT_TRUE(grammar.ok());
  SamplerParams p;
  p.grammar = TokenGrammar::Create(*grammar, vocab);
  Sampler s(p);
  EXPECT_EQ(s.Sample(std::vector<float>{1, 2}), -1);
  EXPECT_FALSE(s.GrammarFinished());
}

}  // namespace
}  // namespace sluice
