#include "memory/prefetch_budget.h"

#include "gtest/gtest.h"

namespace sluice::memory {
namespace {

TEST(PrefetchBudgetTest, GrowsWhileWholeBatchesLandAndShrinksWhenLate) {
  PrefetchBudget b(2, {.min = 1, .max = 4, .start = 1});
  EXPECT_EQ(b.Experts(0), 1);
  b.Observe(0, 1, true);
  EXPECT_EQ(b.Experts(0), 2);
  b.Observe(0, 2, true);
  b.Observe(0, 3, true);
  EXPECT_EQ(b.Experts(0), 4);
  b.Observe(0, 4, true);
  EXPECT_EQ(b.Experts(0), 4);  // max
  b.Observe(0, 4, false);
  EXPECT_EQ(b.Experts(0), 3);
  EXPECT_EQ(b.Experts(1), 1);  // per layer
  EXPECT_EQ(b.landed(), 4);
  EXPECT_EQ(b.late(), 1);
}

TEST(PrefetchBudgetTest, ASmallerBatchThatLandedSaysNothingAboutMore) {
  PrefetchBudget b(1, {.min = 1, .max = 8, .start = 3});
  b.Observe(0, 2, true);  // only two predicted experts missed
  EXPECT_EQ(b.Experts(0), 3);
  b.Observe(0, 2, false);  // but two were too many
  EXPECT_EQ(b.Experts(0), 2);
}

TEST(PrefetchBudgetTest, StaysWithinItsBoundsAndIgnoresWhatIsOutOfRange) {
  PrefetchBudget b(1, {.min = 1, .max = 2, .start = 9});
  EXPECT_EQ(b.Experts(0), 2);  // start clamped
  for (int i = 0; i < 5; ++i) b.Observe(0, 2, false);
  EXPECT_EQ(b.Experts(0), 1);  // min
  b.Observe(0, 0, false);      // an empty batch
  b.Observe(-1, 1, true);
  b.Observe(1, 1, true);
  EXPECT_EQ(b.late(), 5);
  EXPECT_EQ(b.landed(), 0);
  EXPECT_EQ(b.Experts(1), 0);
  PrefetchBudget zero(1, {.min = 0, .max = 1, .start = 0});
  EXPECT_EQ(zero.Experts(0), 0);
}

}  // namespace
}  // namespace sluice::memory
