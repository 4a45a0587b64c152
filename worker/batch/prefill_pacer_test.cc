#include "worker/batch/prefill_pacer.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <utility>

#include "gtest/gtest.h"

namespace sluice::worker {
namespace {

PrefillPacer::Options Opts() {
  PrefillPacer::Options o;
  o.ratio = 2.5;
  o.min_tokens = 16;  // (the worker's is 1)
  o.unmeasured_tokens = 64;
  o.line_weight = 0.5;
  o.max_tokens = 512;
  o.weight = 0.5;
  return o;
}

TEST(PrefillPacerTest, StartsAtTheUnmeasuredCap) {
  PrefillPacer p(Opts());
  EXPECT_EQ(p.Cap(4), 64);
  p.Observe(4, 0, 0.002);  // decodes alone: 2 ms
  EXPECT_EQ(p.Cap(4), 64);  // no prompt token timed yet
  p.Observe(0, 8, 0.002);  // too few prompt tokens alone to time them
  EXPECT_EQ(p.token_seconds(), 0);
  EXPECT_EQ(p.Cap(4), 64);
}

// Decodes alone take 2 ms; beside them a prompt token costs 0.05 ms: a step
// may add (2.5 - 1) x 2 / 0.05 = 60 tokens and stay within 2.5x.
TEST(PrefillPacerTest, KeepsAStepWithinTheRatioOfADecodeStep) {
  PrefillPacer p(Opts());
  p.Observe(4, 0, 0.002);
  p.Observe(4, 16, 0.002 + 16 * 0.00005);
  EXPECT_DOUBLE_EQ(p.decode_seconds(4), 0.002);
  EXPECT_NEAR(p.token_seconds(), 0.00005, 1e-12);
  EXPECT_EQ(p.Cap(4), 60);
  // More chunk sizes on the same line (no cost beyond the decodes'): the
  // line through them gives the same 60.
  p.Observe(4, 60, 0.002 + 60 * 0.00005);
  p.Observe(4, 30, 0.002 + 30 * 0.00005);
  EXPECT_NEAR(static_cast<double>(p.Cap(4)), 60, 1);
  // Cheaper tokens in larger chunks: the line's slope falls, the cap grows.
  p.Observe(4, 200, 0.002 + 200 * 0.00002);
  EXPECT_GT(p.Cap(4), 60);
}

// Slow decode steps (the first ones, a stall) do not count while a faster
// one is among the last 32; once it is not, the fastest of those does.
TEST(PrefillPacerTest, TheDecodeStepIsTheFastestOfTheRecentOnes) {
  PrefillPacer p(Opts());
  p.Observe(2, 0, 0.004);
  EXPECT_DOUBLE_EQ(p.decode_seconds(2), 0.004);
  p.Observe(2, 0, 0.002);
  for (int i = 0; i < 31; ++i) p.Observe(2, 0, 0.005);
  EXPECT_DOUBLE_EQ(p.decode_seconds(2), 0.002);
  p.Observe(2, 0, 0.005);  // 0.002 leaves the window
  EXPECT_DOUBLE_EQ(p.decode_seconds(2), 0.005);
}

TEST(PrefillPacerTest, ClampsToTheBudgetAndTheSmallestChunk) {
  PrefillPacer p(Opts());
  p.Observe(8, 0, 0.010);        // slow decode step
  p.Observe(0, 512, 0.0001);     // a prompt-only step: nearly free tokens
  EXPECT_EQ(p.Cap(8), 512);
  PrefillPacer q(Opts());
  q.Observe(1, 0, 0.001);
  q.Observe(0, 100, 0.100);  // 1 ms a token: 1.5 ms of room is 1 token
  EXPECT_EQ(q.Cap(1), 16);
}

TEST(PrefillPacerTest, IgnoresWhatCannotBeTimed) {
  PrefillPacer p(Opts());
  p.Observe(0, 0, 0.5);
  p.Observe(3, 0, 0);
  p.Observe(2, 50, 0.01);  // beside decodes before any decodes-only step
  EXPECT_EQ(p.decode_seconds(2), 0);
  EXPECT_EQ(p.token_seconds(), 0);
  EXPECT_EQ(p.Cap(2), 64);
}

// On the GPU a lone decode runs the fused program (1 ms) and a chunk beside
// it the batch pass, 4 ms however small, plus 0.01 ms a token: no chunk
// keeps a mixed step within 2.5 ms, so chunks cost a quarter of the fixed
// part, 4 ms / 4 / 0.01 ms = 100 tokens (a step of 6 ms), instead of
// shrinking to 1-token chunks that each still cost 5 ms.
TEST(PrefillPacerTest, AFixedCostBeyondTheBudgetSetsChunksOfAQuarterOfIt) {
  PrefillPacer p(Opts());
  p.Observe(1, 0, 0.001);
  p.Observe(1, 64, 0.001 + 0.004 + 64 * 0.00001);
  p.Observe(1, 20, 0.001 + 0.004 + 20 * 0.00001);
  p.Observe(1, 100, 0.001 + 0.004 + 100 * 0.00001);
  EXPECT_NEAR(static_cast<double>(p.Cap(1)), 100, 1);
}

// A fixed cost within the budget: the line through the mixed steps gives
// (2.5 ms - (1 + 0.5) ms) / 0.01 ms = 100 tokens.
TEST(PrefillPacerTest, TheLineThroughMixedStepsSizesTheChunk) {
  PrefillPacer p(Opts());
  p.Observe(1, 0, 0.001);
  p.Observe(1, 64, 0.0015 + 64 * 0.00001);
  // One chunk size: the per-token model, 1.5 ms / (1.14 ms / 64) = 84.
  EXPECT_EQ(p.Cap(1), 84);
  p.Observe(1, 20, 0.0015 + 20 * 0.00001);
  // Two mixed steps: still the per-token model, its average 0.0264 ms a
  // token: 1.5 / 0.0264 = 56.
  EXPECT_EQ(p.Cap(1), 56);
  p.Observe(1, 40, 0.0015 + 40 * 0.00001);
  EXPECT_NEAR(static_cast<double>(p.Cap(1)), 100, 1);
}

// A fixed part just under the room (decode 10 ms, room 15 ms, fixed 14.9
// ms, 0.1 ms a token): the chunks that keep the ratio would be one token
// (a 512-token prompt in 512 steps); they are a quarter of the fixed
// part's worth instead, 14.9 / 4 / 0.1 = 37. Just over the room the same
// rule, 15.1 / 4 / 0.1 = 37: no step in the cap where the fitted part
// crosses the room (it was (10 + 15.1) / 0.1 = 251 there, and on the H100
// the streams' gaps swung between ~2x and ~7.7x their median from run to
// run as the fitted part fell either side).
TEST(PrefillPacerTest, AFixedPartNearTheRoomStillMovesThePrompt) {
  for (const auto& [fixed, want] : {std::pair{0.0149, 37}, std::pair{0.0151, 37}}) {
    PrefillPacer::Options o = Opts();
    o.min_tokens = 1;
    PrefillPacer p(o);
    p.Observe(4, 0, 0.010);
    for (int t : {64, 20, 100, 40}) p.Observe(4, t, 0.010 + fixed + t * 0.0001);
    EXPECT_NEAR(static_cast<double>(p.Cap(4)), want, 1) << fixed;
  }
}

// bench35's mixed steps on the H100 (2026-12-06, runs 10 and 11): 8
// decodes take 3.9 ms, a chunk beside them 5.8 ms fixed (just under the
// room of 1.5 x 3.9 = 5.85 ms) plus 0.078 ms a token, each step within 5%
// either way. A 4,096-token prompt paced beside them with the worker's
// options: once the line is fitted (after the first three mixed steps) the
// longest step is 3.45 decode steps (the fits' noise over decode + 1.25 x
// fixed = 2.86; 3.18-3.45 over four seeds), in 151 steps. The old rule,
// chunks as costly as decode + fixed wherever a fit fell past the room,
// gave 7.07 in 33 steps here, as the H100's streams' p99 over median swung
// between ~2x and ~7.7x.
TEST(PrefillPacerTest, AFixedPartAtTheRoomKeepsStepsBoundedUnderNoise) {
  PrefillPacer::Options o;  // the worker's
  PrefillPacer p(o);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> noise(0.95, 1.05);
  const double decode = 0.0039, fixed = 0.0058, per_token = 0.000078;
  for (int i = 0; i < 8; ++i) p.Observe(8, 0, decode * noise(rng));
  int64_t left = 4096;
  int steps = 0;
  double worst = 0;
  int over_3 = 0;
  while (left > 0) {
    const int64_t chunk = std::min(left, p.Cap(8));
    ASSERT_GE(chunk, 1);
    const double seconds = (decode + fixed + per_token * static_cast<double>(chunk)) * noise(rng);
    if (++steps > 3) {
      worst = std::max(worst, seconds / decode);
      over_3 += seconds > 3 * decode;
    }
    p.Observe(8, chunk, seconds);
    left -= chunk;
  }
  std::printf("a 4,096-token prompt in %d steps, the longest %.2f decode steps, %d over 3\n",
              steps, worst, over_3);
  EXPECT_LT(worst, 3.6);
  EXPECT_LT(steps, 4096 / 8);  // chunks of tens of tokens, not a few
}

// Measured on the H100 (2026-12-06): after a round of a few streams, 32
// decodes take 11 ms a step against 3 ms for 2; sized by the 2-decode step
// the cap had fallen to a token, and 32 new 10-token prompts entered one
// per ~90 ms. Each batch size has its own decode step: a chunk of 32
// decodes may add (2.5 - 1) x 11 ms; with 2 ms fixed and 0.04 ms a token
// that is (16.5 - 2) / 0.04 = 362 tokens, and beside 2 decodes
// (4.5 - 2) / 0.04 = 62.
TEST(PrefillPacerTest, EachBatchSizeHasItsOwnDecodeStep) {
  PrefillPacer p(Opts());
  for (int i = 0; i < 40; ++i) p.Observe(2, 0, 0.003);
  p.Observe(32, 0, 0.011);
  EXPECT_DOUBLE_EQ(p.decode_seconds(2), 0.003);
  EXPECT_DOUBLE_EQ(p.decode_seconds(32), 0.011);
  EXPECT_DOUBLE_EQ(p.decode_seconds(17), 0.011);  // 17..32: one bucket
  for (int t : {64, 20, 100, 40}) p.Observe(32, t, 0.011 + 0.002 + t * 0.00004);
  EXPECT_NEAR(static_cast<double>(p.Cap(32)), 362, 1);
  EXPECT_NEAR(static_cast<double>(p.Cap(2)), 62, 1);
  // 8 decodes were never timed alone: the nearest timed sizes are 2 and
  // 32, two buckets away each; the smaller's step is borrowed.
  EXPECT_DOUBLE_EQ(p.decode_seconds(8), 0.003);
  EXPECT_EQ(p.Cap(8), p.Cap(2));
  // Past the last bucket every size shares it.
  p.Observe(5000, 0, 0.050);
  EXPECT_DOUBLE_EQ(p.decode_seconds(100000), 0.050);
}

}  // namespace
}  // namespace sluice::worker
