// OverlapSlots (batch_pass.h): the tables a one-token pass uploads to
// multiply the experts in slots while the missed ones are copied. Runs
// without a GPU.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "model/cuda/batch_pass.h"

namespace sluice {
namespace {

// Slots 0..3 route to experts 7, 2, 9, 4 of 10; 2 and 4 are still being
// copied: the launch order is slots 0, 2 (in place), then 1, 3.
TEST(OverlapSlotsTest, InPlaceSlotsFirstEachPartInSlotOrder) {
  const std::vector<int32_t> ids = {7, 2, 9, 4}, pending = {4, 2};
  std::vector<int32_t> out(16, -1);
  EXPECT_EQ(OverlapSlots(ids, pending, 10, out.data()), 2);
  const std::vector<int32_t> want = {
      7, 9, 2, 4,                  // ids in launch order
      7, 9, 17, 19, 2, 4, 12, 14,  // each part: gate ids, then up ids (+ 10)
      0, 2, 1, 3};                 // slot s's row: 7 -> 0, 2 -> 2, 9 -> 1, 4 -> 3
  EXPECT_EQ(out, want);
}

// Nothing in place (every expert copied) and nothing pending: one part,
// and slot s's row is s when nothing is pending (the one-launch layout).
TEST(OverlapSlotsTest, AllOneSide) {
  const std::vector<int32_t> ids = {5, 1, 3};
  std::vector<int32_t> out(12, -1);
  EXPECT_EQ(OverlapSlots(ids, ids, 8, out.data()), 0);
  EXPECT_EQ(out, (std::vector<int32_t>{5, 1, 3, 5, 1, 3, 13, 9, 11, 0, 1, 2}));
  std::fill(out.begin(), out.end(), -1);
  EXPECT_EQ(OverlapSlots(ids, {}, 8, out.data()), 3);
  EXPECT_EQ(out, (std::vector<int32_t>{5, 1, 3, 5, 1, 3, 13, 9, 11, 0, 1, 2}));
}

}  // namespace
}  // namespace sluice
