#include "memory/expert_tiers.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::memory {
namespace {

std::unique_ptr<ExpertTiers> Make(int32_t layers, int32_t experts, int32_t device,
                                  int32_t host, bool exclusive,
                                  const std::string& device_policy = "lru",
                                  const std::string& host_policy = "lru",
                                  double half_life = 0) {
  std::shared_ptr<KeyFrequency> f;
  if (half_life > 0) f = std::make_shared<KeyFrequency>(half_life);
  auto d = MakeTierPolicy(device_policy, f);
  auto h = MakeTierPolicy(host_policy, f);
  EXPECT_TRUE(d.ok() && h.ok());
  auto t = ExpertTiers::Create({layers, experts, device, host, 10, exclusive},
                               std::move(*d), std::move(*h), f);
  EXPECT_TRUE(t.ok()) << t.status();
  return std::move(*t);
}

TierStep Go(ExpertTiers& t, int32_t layer, std::vector<int32_t> experts) {
  auto s = t.Step(layer, experts);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : TierStep{};
}

// A cycle of 5 experts over a device of 2 slots and a host tier of 4:
// exclusive, the tiers hold all 5 (2 + 3, the host's fourth slot being the
// step's slack: a promoted expert's slot is freed only at the end of its
// step) and nothing is read from disk after the first round; inclusive, the
// host tier's LRU over the same cycle of misses holds nothing useful and
// every lookup goes to disk.
TEST(ExpertTiersTest, ExclusiveTiersHoldTheirSumInclusiveTheirMax) {
  for (const bool exclusive : {true, false}) {
    auto t = Make(1, 8, 2, 4, exclusive);
    for (int r = 0; r < 10; ++r) {
      for (int32_t e = 0; e < 5; ++e) Go(*t, 0, {e});
    }
    const ExpertTiersCounters c = t->Snapshot();
    EXPECT_EQ(c.lookups, 50u);
    EXPECT_EQ(c.device_hits, 0u);  // LRU over a cycle longer than the device
    EXPECT_EQ(c.disk_reads, exclusive ? 5u : 50u) << exclusive;
    EXPECT_EQ(c.host_hits, exclusive ? 45u : 0u) << exclusive;
    EXPECT_EQ(t->InBoth(), exclusive ? 0 : 2) << exclusive;
  }
}

TEST(ExpertTiersTest, DemotionAndPromotionSlots) {
  auto t = Make(1, 8, 1, 2, /*exclusive=*/true);
  TierStep s = Go(*t, 0, {1});  // disk -> device slot 0
  EXPECT_EQ(s.source[0], ExpertSource::kDisk);
  EXPECT_TRUE(s.demotions.empty());
  s = Go(*t, 0, {2});  // disk -> device slot 0; 1 demoted to host
  EXPECT_EQ(s.source[0], ExpertSource::kDisk);
  ASSERT_EQ(s.demotions.size(), 1u);
  EXPECT_EQ(s.demotions[0].key, (ExpertKey{0, 1}));
  EXPECT_EQ(s.demotions[0].device_slot, 0);
  const int32_t h1 = s.demotions[0].host_slot;
  EXPECT_EQ(t->host().Peek({0, 1}), h1);
  EXPECT_FALSE(t->device().Peek({0, 1}).has_value());
  s = Go(*t, 0, {1});  // host -> device; 2 demoted; 1's host slot freed
  EXPECT_EQ(s.source[0], ExpertSource::kHost);
  EXPECT_EQ(s.host_slot[0], h1);
  ASSERT_EQ(s.demotions.size(), 1u);
  EXPECT_EQ(s.demotions[0].key, (ExpertKey{0, 2}));
  // Not the slot 1 is being read from: that one is held through the step.
  EXPECT_NE(s.demotions[0].host_slot, h1);
  EXPECT_EQ(s.promoted, (std::vector<ExpertKey>{{0, 1}}));
  EXPECT_FALSE(t->host().Peek({0, 1}).has_value());
  EXPECT_EQ(t->InBoth(), 0);
  const ExpertTiersCounters c = t->Snapshot();
  EXPECT_EQ(c.demoted, 2u);
  EXPECT_EQ(c.promoted, 1u);
  EXPECT_EQ(c.host.removed, 1u);
}

// Random routing, every pairing of policies: exclusive never holds an
// expert twice, and the counters add up.
TEST(ExpertTiersTest, ExclusiveInvariantsOnRandomSteps) {
  for (const char* dp : {"lru", "tinylfu"}) {
    for (const char* hp : {"lru", "tinylfu"}) {
      auto t = Make(3, 16, 10, 14, /*exclusive=*/true, dp, hp, /*half_life=*/64);
      std::mt19937 rng(3);
      for (int i = 0; i < 3000; ++i) {
        std::vector<int32_t> e;
        const size_t n = 1 + rng() % 4;
        while (e.size() < n) {
          // Skewed: low ids more often, so the policies differ.
          const int32_t x = static_cast<int32_t>(std::min(rng() % 16, rng() % 16));
          if (std::find(e.begin(), e.end(), x) == e.end()) e.push_back(x);
        }
        TierStep s = Go(*t, static_cast<int32_t>(rng() % 3), e);
        for (const TierStep::Demotion& d : s.demotions) {
          ASSERT_EQ(t->host().Peek(d.key), d.host_slot);
        }
        ASSERT_EQ(t->InBoth(), 0) << dp << "/" << hp << " step " << i;
      }
      const ExpertTiersCounters c = t->Snapshot();
      EXPECT_EQ(c.device_hits + c.host_hits + c.disk_reads, c.lookups);
      EXPECT_EQ(c.device.hits, c.device_hits);
      EXPECT_EQ(c.demoted + c.dropped, c.device.evictions) << dp << "/" << hp;
      EXPECT_EQ(c.host.removed, c.promoted);
      EXPECT_GT(c.host_hits, 0u);
    }
  }
}

// A shared frequency: the host tier's tinylfu refuses a one-off expert the
// device evicts, keeping the hotter one it holds; LRU would take it.
TEST(ExpertTiersTest, TinyLfuHostRefusesAOneOffDeviceVictim) {
  for (const bool tiny : {true, false}) {
    auto t = Make(1, 16, 1, 1, /*exclusive=*/true, "lru", tiny ? "tinylfu" : "lru",
                  /*half_life=*/1e30);
    for (int r = 0; r < 5; ++r) Go(*t, 0, {1});  // 1: count 5, on the device
    Go(*t, 0, {2});  // 1 demoted into the (empty) host tier
    Go(*t, 0, {3});  // 2 (count 1) demoted: the host holds 1 (count 5)
    EXPECT_EQ(t->host().Peek({0, 1}).has_value(), tiny) << tiny;
    EXPECT_EQ(t->host().Peek({0, 2}).has_value(), !tiny) << tiny;
    EXPECT_EQ(t->Snapshot().dropped, tiny ? 1u : 0u);
  }
}

TEST(ExpertTiersTest, ErrorsChangeNothing) {
  auto t = Make(1, 4, 2, 2, true);
  EXPECT_EQ(t->Step(0, std::vector<int32_t>{1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t->Step(1, std::vector<int32_t>{0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t->Snapshot().lookups, 0u);
  EXPECT_EQ(ExpertTiers::Create({1, 4, 2, -1, 1, true}, MakeLruPolicy(),
                                MakeLruPolicy())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sluice::memory
