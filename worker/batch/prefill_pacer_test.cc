#include "worker/batch/prefill_pacer.h"

#include "gtest/gtest.h"

namespace sluice::worker {
namespace {

PrefillPacer::Options Opts() {
  PrefillPacer::Options o;
  o.ratio = 2.5;
  o.min_tokens = 16;  // (the worker's is 1)
  o.unmeasured_tokens = 64;
  o.max_tokens = 512;
  o.weight = 0.5;
  return o;
}

TEST(PrefillPacerTest, StartsAtTheUnmeasuredCap) {
  PrefillPacer p(Opts());
  EXPECT_EQ(p.Cap(), 64);
  p.Observe(4, 0, 0.002);  // decodes alone: 2 ms
  EXPECT_EQ(p.Cap(), 64);  // no prompt token timed yet
  p.Observe(0, 8, 0.002);  // too few prompt tokens alone to time them
  EXPECT_EQ(p.token_seconds(), 0);
  EXPECT_EQ(p.Cap(), 64);
}

// Decodes alone take 2 ms; beside them a prompt token costs 0.05 ms: a step
// may add (2.5 - 1) x 2 / 0.05 = 60 tokens and stay within 2.5x.
TEST(PrefillPacerTest, KeepsAStepWithinTheRatioOfADecodeStep) {
  PrefillPacer p(Opts());
  p.Observe(4, 0, 0.002);
  p.Observe(4, 16, 0.002 + 16 * 0.00005);
  EXPECT_DOUBLE_EQ(p.decode_seconds(), 0.002);
  EXPECT_NEAR(p.token_seconds(), 0.00005, 1e-12);
  EXPECT_EQ(p.Cap(), 60);
  // Faster prompt tokens (a larger chunk is cheaper per token): the cap grows.
  p.Observe(4, 60, 0.002 + 60 * 0.00001);
  EXPECT_NEAR(p.token_seconds(), 0.00003, 1e-12);
  EXPECT_EQ(p.Cap(), 100);
}

// Slow decode steps (the first ones, a stall) do not count while a faster
// one is among the last 32; once it is not, the fastest of those does.
TEST(PrefillPacerTest, TheDecodeStepIsTheFastestOfTheRecentOnes) {
  PrefillPacer p(Opts());
  p.Observe(2, 0, 0.004);
  EXPECT_DOUBLE_EQ(p.decode_seconds(), 0.004);
  p.Observe(2, 0, 0.002);
  for (int i = 0; i < 31; ++i) p.Observe(2, 0, 0.005);
  EXPECT_DOUBLE_EQ(p.decode_seconds(), 0.002);
  p.Observe(2, 0, 0.005);  // 0.002 leaves the window
  EXPECT_DOUBLE_EQ(p.decode_seconds(), 0.005);
}

TEST(PrefillPacerTest, ClampsToTheBudgetAndTheSmallestChunk) {
  PrefillPacer p(Opts());
  p.Observe(8, 0, 0.010);        // slow decode step
  p.Observe(0, 512, 0.0001);     // a prompt-only step: nearly free tokens
  EXPECT_EQ(p.Cap(), 512);
  PrefillPacer q(Opts());
  q.Observe(1, 0, 0.001);
  q.Observe(0, 100, 0.100);  // 1 ms a token: 1.5 ms of room is 1 token
  EXPECT_EQ(q.Cap(), 16);
}

TEST(PrefillPacerTest, IgnoresWhatCannotBeTimed) {
  PrefillPacer p(Opts());
  p.Observe(0, 0, 0.5);
  p.Observe(3, 0, 0);
  p.Observe(2, 50, 0.01);  // beside decodes before any decodes-only step
  EXPECT_EQ(p.decode_seconds(), 0);
  EXPECT_EQ(p.token_seconds(), 0);
  EXPECT_EQ(p.Cap(), 64);
}

}  // namespace
}  // namespace sluice::worker
