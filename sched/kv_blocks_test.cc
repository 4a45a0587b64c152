#include "sched/kv_blocks.h"

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::sched {
namespace {

std::vector<int32_t> Ids(absl::Span<const int32_t> table) {
  return std::vector<int32_t>(table.begin(), table.end());
}

TEST(KvBlockPoolTest, CreateRefusesEmptyPoolsAndBlocks) {
  EXPECT_EQ(KvBlockPool::Create(0, 16).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KvBlockPool::Create(4, 0).status().code(), absl::StatusCode::kInvalidArgument);
  auto pool = KvBlockPool::Create(4, 16);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(pool->num_blocks(), 4);
  EXPECT_EQ(pool->free_blocks(), 4);
  EXPECT_EQ(pool->used_blocks(), 0);
  EXPECT_TRUE(pool->CheckInvariants().ok());
}

TEST(KvBlockPoolTest, BlocksForRoundsUp) {
  auto pool = *KvBlockPool::Create(8, 16);
  EXPECT_EQ(pool.BlocksFor(-3), 0);
  EXPECT_EQ(pool.BlocksFor(0), 0);
  EXPECT_EQ(pool.BlocksFor(1), 1);
  EXPECT_EQ(pool.BlocksFor(16), 1);
  EXPECT_EQ(pool.BlocksFor(17), 2);
  EXPECT_EQ(pool.BlocksFor(4096), 256);
}

// Tables grow in position order from the free list (block 0 first) and
// only by what they lack.
TEST(KvBlockPoolTest, ReserveGrowsTablesInOrder) {
  auto pool = *KvBlockPool::Create(8, 16);
  ASSERT_TRUE(pool.Reserve(7, 20).ok());  // 2 blocks
  EXPECT_EQ(Ids(pool.Table(7)), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(pool.TokensHeld(7), 32);
  EXPECT_EQ(pool.BlocksNeeded(7, 32), 0);
  EXPECT_EQ(pool.BlocksNeeded(7, 33), 1);
  ASSERT_TRUE(pool.Reserve(7, 32).ok());  // no-op
  ASSERT_TRUE(pool.Reserve(7, 10).ok());  // no-op (never shrinks)
  EXPECT_EQ(pool.Table(7).size(), 2u);
  ASSERT_TRUE(pool.Reserve(9, 1).ok());
  EXPECT_EQ(Ids(pool.Table(9)), (std::vector<int32_t>{2}));
  ASSERT_TRUE(pool.Reserve(7, 33).ok());
  EXPECT_EQ(Ids(pool.Table(7)), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(pool.used_blocks(), 4);
  EXPECT_EQ(pool.num_tables(), 2u);
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

// A reservation that does not fit changes nothing and says why.
TEST(KvBlockPoolTest, ReserveIsAllOrNothing) {
  auto pool = *KvBlockPool::Create(4, 16);
  ASSERT_TRUE(pool.Reserve(1, 48).ok());  // 3 blocks
  const absl::Status s = pool.Reserve(2, 17);  // needs 2, 1 free
  ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(std::string(s.message()),
            "kv blocks: sequence 2 needs 2 more blocks of 16 tokens to hold 17 tokens; 1 of 4 "
            "are free");
  EXPECT_FALSE(pool.Has(2));
  EXPECT_EQ(pool.free_blocks(), 1);
  EXPECT_EQ(pool.Reserve(1, 80).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pool.Table(1).size(), 3u);
  EXPECT_TRUE(pool.CanHold(1, 64));
  EXPECT_FALSE(pool.CanHold(1, 65));
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

// Released blocks come back LIFO: the sequence's first block is handed out
// next.
TEST(KvBlockPoolTest, ReleaseReturnsEveryBlock) {
  auto pool = *KvBlockPool::Create(6, 4);
  ASSERT_TRUE(pool.Reserve(1, 8).ok());   // 0 1
  ASSERT_TRUE(pool.Reserve(2, 12).ok());  // 2 3 4
  EXPECT_EQ(pool.Release(1), 2);
  EXPECT_EQ(pool.Release(1), 0);
  EXPECT_EQ(pool.Release(99), 0);
  EXPECT_FALSE(pool.Has(1));
  EXPECT_TRUE(pool.Table(1).empty());
  EXPECT_EQ(pool.free_blocks(), 3);
  ASSERT_TRUE(pool.Reserve(3, 12).ok());
  EXPECT_EQ(Ids(pool.Table(3)), (std::vector<int32_t>{0, 1, 5}));
  EXPECT_EQ(pool.Release(2), 3);
  EXPECT_EQ(pool.Release(3), 3);
  EXPECT_EQ(pool.free_blocks(), 6);
  EXPECT_EQ(pool.num_tables(), 0u);
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

// Random reserve/release against a model of which sequence holds how many
// blocks: every block is in one place, and the counts agree.
TEST(KvBlockPoolTest, RandomOperationsKeepTheAccounting) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    auto pool = *KvBlockPool::Create(1 + rng() % 64, 1 + rng() % 32);
    std::vector<int64_t> held(16, 0);  // blocks per sequence id
    for (int op = 0; op < 2000; ++op) {
      const SeqId seq = rng() % held.size();
      if (rng() % 4 == 0) {
        EXPECT_EQ(pool.Release(seq), held[seq]);
        held[seq] = 0;
      } else {
        const int64_t tokens = rng() % (pool.num_blocks() * pool.block_tokens() / 2 + 2);
        const int64_t need = std::max<int64_t>(0, pool.BlocksFor(tokens) - held[seq]);
        const absl::Status s = pool.Reserve(seq, tokens);
        int64_t free = pool.num_blocks();
        for (int64_t h : held) free -= h;
        if (need <= free) {
          ASSERT_TRUE(s.ok()) << s;
          held[seq] += need;
        } else {
          ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
        }
      }
      int64_t used = 0;
      for (size_t i = 0; i < held.size(); ++i) {
        ASSERT_EQ(static_cast<int64_t>(pool.Table(i).size()), held[i]);
        used += held[i];
      }
      ASSERT_EQ(pool.used_blocks(), used);
      const absl::Status inv = pool.CheckInvariants();
      ASSERT_TRUE(inv.ok()) << "seed " << seed << " op " << op << ": " << inv;
    }
  }
}

TEST(StateSlotsTest, LowestFreeSlotAndRelease) {
  EXPECT_EQ(StateSlots::Create(0).status().code(), absl::StatusCode::kInvalidArgument);
  auto slots = *StateSlots::Create(3);
  EXPECT_EQ(slots.Acquire(10), 0);
  EXPECT_EQ(slots.Acquire(11), 1);
  EXPECT_EQ(slots.Acquire(10), 0);  // already held
  EXPECT_EQ(slots.Acquire(12), 2);
  EXPECT_EQ(slots.Acquire(13), std::nullopt);
  EXPECT_EQ(slots.free_slots(), 0);
  EXPECT_TRUE(slots.Release(11));
  EXPECT_FALSE(slots.Release(11));
  EXPECT_EQ(slots.SlotOf(11), std::nullopt);
  EXPECT_EQ(slots.Acquire(13), 1);
  EXPECT_EQ(slots.SlotOf(13), 1);
  EXPECT_TRUE(slots.Release(10));
  EXPECT_EQ(slots.Acquire(14), 0);
  EXPECT_EQ(slots.free_slots(), 0);
  EXPECT_TRUE(slots.CheckInvariants().ok());
}

}  // namespace
}  // namespace sluice::sched
