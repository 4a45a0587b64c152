#include "memory/slot_cache.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::memory {
namespace {

using Kind = SlotAssignment::Kind;

std::unique_ptr<SlotCache> MakeCache(int32_t n_layer, int32_t n_expert,
                                     int32_t n_slots,
                                     std::unique_ptr<EvictionPolicy> policy,
                                     uint64_t slice_bytes = 100) {
  auto c = SlotCache::Create({n_layer, n_expert, n_slots, slice_bytes},
                             std::move(policy));
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(*c);
}

// One step of one expert: BeginStep, Acquire, Release.
SlotAssignment Touch(SlotCache& c, int32_t layer, int32_t expert) {
  c.BeginStep();
  auto got = c.Acquire(layer, {expert});
  EXPECT_TRUE(got.ok()) << got.status();
  c.Release();
  return got.ok() ? (*got)[0] : SlotAssignment{};
}

// The experts resident in layer 0, by slot.
std::vector<int32_t> Residents(const SlotCache& c) {
  std::vector<int32_t> r;
  for (int32_t s = 0; s < c.options().n_slots; ++s) {
    auto k = c.SlotKey(s);
    r.push_back(k ? k->expert : -1);
  }
  return r;
}

TEST(SlotCacheTest, CreateRejectsBadOptions) {
  EXPECT_EQ(SlotCache::Create({0, 4, 2, 1}, MakeLruPolicy()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SlotCache::Create({1, 0, 2, 1}, MakeLruPolicy()).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto neg = SlotCache::Create({1, 4, -1, 1}, MakeLruPolicy());
  EXPECT_EQ(neg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(neg.status().message().find("n_slots"), std::string::npos);
  EXPECT_EQ(SlotCache::Create({1, 4, 2, 1}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SlotCacheTest, MakePolicyByName) {
  auto lru = MakePolicy("lru");
  ASSERT_TRUE(lru.ok());
  EXPECT_EQ((*lru)->Name(), "lru");
  auto lfu = MakePolicy("lfu");
  ASSERT_TRUE(lfu.ok());
  EXPECT_EQ((*lfu)->Name(), "lfu");
  auto bad = MakePolicy("fifo");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("fifo"), std::string::npos);
  EXPECT_NE(bad.status().message().find("lru, lfu"), std::string::npos);
  EXPECT_EQ(MakePolicy("belady").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SlotCacheTest, LruEvictsLeastRecentlyUsed) {
  auto c = MakeCache(1, 8, 3, MakeLruPolicy());
  EXPECT_EQ(Touch(*c, 0, 1).kind, Kind::kMiss);  // slot 0
  EXPECT_EQ(Touch(*c, 0, 2).kind, Kind::kMiss);  // slot 1
  EXPECT_EQ(Touch(*c, 0, 3).kind, Kind::kMiss);  // slot 2
  EXPECT_EQ(Residents(*c), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(Touch(*c, 0, 1).kind, Kind::kHit);  // recency: 2, 3, 1
  SlotAssignment a = Touch(*c, 0, 4);           // evicts 2
  EXPECT_EQ(a.kind, Kind::kMiss);
  EXPECT_TRUE(a.evicted);
  EXPECT_EQ(a.evicted_key, (ExpertKey{0, 2}));
  EXPECT_EQ(a.slot, 1);
  a = Touch(*c, 0, 5);  // recency 3, 1, 4: evicts 3
  EXPECT_EQ(a.evicted_key, (ExpertKey{0, 3}));
  a = Touch(*c, 0, 2);  // recency 1, 4, 5: evicts 1
  EXPECT_EQ(a.evicted_key, (ExpertKey{0, 1}));
  EXPECT_EQ(Residents(*c), (std::vector<int32_t>{2, 4, 5}));
  EXPECT_EQ(c->Snapshot().evictions, 3u);
  EXPECT_EQ(c->policy_name(), "lru");
}

TEST(SlotCacheTest, LfuKeepsTheFrequentExpertThatLruWouldEvict) {
  // 1 is used three times, then 2 and 3 once each; a new expert must evict
  // 2 (lowest score, 1 is frequent), where LRU evicts 1.
  for (bool lfu : {true, false}) {
    auto c = MakeCache(1, 8, 3, lfu ? MakeDecayedLfuPolicy(1000) : MakeLruPolicy());
    Touch(*c, 0, 1);
    Touch(*c, 0, 1);
    Touch(*c, 0, 1);
    Touch(*c, 0, 2);
    Touch(*c, 0, 3);
    SlotAssignment a = Touch(*c, 0, 4);
    EXPECT_EQ(a.evicted_key, (ExpertKey{0, lfu ? 2 : 1})) << "lfu=" << lfu;
  }
}

TEST(SlotCacheTest, LfuTiesGoToTheLeastRecent) {
  // With a half-life of 1e30 accesses every access is worth exactly 1.0 in
  // double precision: 5 (accesses 0, 3) and 6 (1, 2) tie at 2; 6 is the
  // less recent, so it goes although 5 sits in the lower slot.
  auto c = MakeCache(1, 8, 2, MakeDecayedLfuPolicy(1e30));
  Touch(*c, 0, 5);
  Touch(*c, 0, 6);
  Touch(*c, 0, 6);
  Touch(*c, 0, 5);
  EXPECT_EQ(Touch(*c, 0, 7).evicted_key, (ExpertKey{0, 6}));
}

TEST(SlotCacheTest, LfuWithShortHalfLifeActsLikeLru) {
  // With a half-life of one access, one recent access outweighs three old
  // ones: 1 (used thrice, long ago) goes before 3 (used once, last).
  auto c = MakeCache(1, 8, 3, MakeDecayedLfuPolicy(1.0));
  Touch(*c, 0, 1);
  Touch(*c, 0, 1);
  Touch(*c, 0, 1);
  Touch(*c, 0, 2);
  Touch(*c, 0, 3);
  EXPECT_EQ(Touch(*c, 0, 4).evicted_key, (ExpertKey{0, 1}));
}

TEST(SlotCacheTest, LfuScoreDecaysSoOldFrequencyFades) {
  // Half-life 2, scores scaled to access 0: expert 1 used at 0, 1, 2 scores
  // 1 + 2^0.5 + 2 = 4.41. A single later use at t scores 2^(t/2): 2.83 at 3
  // and 4 at 4 (below 1's, so those fillers go), 5.66 at 5 (above: now 1
  // goes).
  auto c = MakeCache(1, 16, 2, MakeDecayedLfuPolicy(2.0));
  Touch(*c, 0, 1);
  Touch(*c, 0, 1);
  Touch(*c, 0, 1);
  EXPECT_FALSE(Touch(*c, 0, 10).evicted);  // access 3, free slot
  EXPECT_EQ(Touch(*c, 0, 11).evicted_key, (ExpertKey{0, 10}));
  EXPECT_EQ(Touch(*c, 0, 12).evicted_key, (ExpertKey{0, 11}));
  EXPECT_EQ(Touch(*c, 0, 13).evicted_key, (ExpertKey{0, 1}));
}

TEST(SlotCacheTest, BeladyEvictsTheKeyUsedFurthestAhead) {
  // Accesses 1 2 3 1 2 3 (numbered 0..5) over two slots.
  std::vector<int32_t> seq = {1, 2, 3, 1, 2, 3};
  std::vector<ExpertKey> future;
  for (int32_t e : seq) future.push_back({0, e});
  auto c = MakeCache(1, 8, 2, MakeBeladyPolicy(future));
  std::vector<Kind> kinds;
  for (int32_t e : seq) kinds.push_back(Touch(*c, 0, e).kind);
  // 1 m, 2 m, 3 m (evicts 2: its next use, 4, is after 1's, 3), 1 h,
  // 2 m (evicts 1, never used again), 3 h.
  EXPECT_EQ(kinds, (std::vector<Kind>{Kind::kMiss, Kind::kMiss, Kind::kMiss,
                                      Kind::kHit, Kind::kMiss, Kind::kHit}));
  EXPECT_EQ(c->Snapshot().hits, 2u);
  EXPECT_EQ(c->policy_name(), "belady");
}

TEST(SlotCacheTest, BeladyBeatsLruOnACycleLongerThanTheCache) {
  // Cycle of 4 over 3 slots: LRU always misses; MIN hits.
  std::vector<ExpertKey> future;
  for (int r = 0; r < 10; ++r) {
    for (int32_t e = 0; e < 4; ++e) future.push_back({0, e});
  }
  auto lru = MakeCache(1, 4, 3, MakeLruPolicy());
  auto min = MakeCache(1, 4, 3, MakeBeladyPolicy(future));
  for (const ExpertKey& k : future) {
    Touch(*lru, k.layer, k.expert);
    Touch(*min, k.layer, k.expert);
  }
  EXPECT_EQ(lru->Snapshot().hits, 0u);
  // MIN: 4 cold misses, then one miss in every 3 accesses (12 of 36), so
  // 24 hits of 40 (checked against a hand simulation of MIN).
  EXPECT_EQ(min->Snapshot().hits, 24u);
}

TEST(SlotCacheTest, ProtectedSlotsAreNeverEvicted) {
  auto c = MakeCache(1, 8, 2, MakeLruPolicy());
  c->BeginStep();
  ASSERT_TRUE(c->Acquire(0, {1, 2}).ok());
  // Same step: both slots protected, so 3 is forced, not evicting 1 or 2.
  auto got = c->Acquire(0, {3});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].kind, Kind::kForced);
  EXPECT_EQ((*got)[0].slot, -1);
  EXPECT_EQ(Residents(*c), (std::vector<int32_t>{1, 2}));
  c->Release();
  // After Release the least recent (1) is evictable again.
  EXPECT_EQ(Touch(*c, 0, 3).evicted_key, (ExpertKey{0, 1}));
}

TEST(SlotCacheTest, HitsOfTheCallAreProtectedBeforeMissesChooseVictims) {
  // 1 is the LRU slot, but it is a hit of this call: the miss (3) must
  // evict 2 even though 3 comes first in the call.
  auto c = MakeCache(1, 8, 2, MakeLruPolicy());
  Touch(*c, 0, 1);
  Touch(*c, 0, 2);
  c->BeginStep();
  auto got = c->Acquire(0, {3, 1});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].kind, Kind::kMiss);
  EXPECT_EQ((*got)[0].evicted_key, (ExpertKey{0, 2}));
  EXPECT_EQ((*got)[1].kind, Kind::kHit);
  EXPECT_EQ((*got)[1].slot, 0);
}

TEST(SlotCacheTest, MoreExpertsThanSlotsForcesTheExtraOnesAndCountsOnce) {
  auto c = MakeCache(2, 8, 3, MakeLruPolicy(), /*slice_bytes=*/10);
  c->BeginStep();
  auto got = c->Acquire(1, {7, 6, 5, 4, 3});
  ASSERT_TRUE(got.ok());
  std::vector<Kind> kinds;
  for (const auto& a : *got) kinds.push_back(a.kind);
  EXPECT_EQ(kinds, (std::vector<Kind>{Kind::kMiss, Kind::kMiss, Kind::kMiss,
                                      Kind::kForced, Kind::kForced}));
  SlotCacheCounters n = c->Snapshot();
  EXPECT_EQ(n.exhausted, 1u);
  EXPECT_EQ(n.forced, 2u);
  EXPECT_EQ(n.misses, 5u);
  EXPECT_EQ(n.evictions, 0u);
  EXPECT_EQ(n.bytes_streamed, 30u);
  EXPECT_EQ(n.bytes_forced, 20u);
}

TEST(SlotCacheTest, CapacityZeroForcesEveryMiss) {
  auto c = MakeCache(1, 4, 0, MakeLruPolicy(), 8);
  c->BeginStep();
  auto got = c->Acquire(0, {0, 1});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].kind, Kind::kForced);
  EXPECT_EQ((*got)[1].kind, Kind::kForced);
  EXPECT_EQ(Touch(*c, 0, 0).kind, Kind::kForced);
  SlotCacheCounters n = c->Snapshot();
  EXPECT_EQ(n.lookups, 3u);
  EXPECT_EQ(n.hits, 0u);
  EXPECT_EQ(n.exhausted, 2u);
  EXPECT_EQ(n.bytes_forced, 24u);
  EXPECT_EQ(n.bytes_streamed, 0u);
  auto p = c->Prefetch({0, 1});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, Kind::kNone);
  EXPECT_EQ(c->SlotKey(0), std::nullopt);
}

TEST(SlotCacheTest, CapacityOneAlternates) {
  auto c = MakeCache(1, 4, 1, MakeLruPolicy());
  EXPECT_EQ(Touch(*c, 0, 0).kind, Kind::kMiss);
  EXPECT_EQ(Touch(*c, 0, 0).kind, Kind::kHit);
  SlotAssignment a = Touch(*c, 0, 1);
  EXPECT_EQ(a.kind, Kind::kMiss);
  EXPECT_EQ(a.slot, 0);
  EXPECT_EQ(a.evicted_key, (ExpertKey{0, 0}));
  c->BeginStep();
  auto got = c->Acquire(0, {2, 3});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].kind, Kind::kMiss);
  EXPECT_EQ((*got)[1].kind, Kind::kForced);
  EXPECT_EQ(c->Peek({0, 2}), 0);
  EXPECT_EQ(c->Peek({0, 1}), std::nullopt);
}

TEST(SlotCacheTest, InvalidArgumentsLeaveEverythingUntouched) {
  auto c = MakeCache(2, 4, 2, MakeLruPolicy());
  Touch(*c, 0, 1);
  const SlotCacheCounters before = c->Snapshot();
  c->BeginStep();
  EXPECT_EQ(c->Acquire(2, {0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Acquire(-1, {0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto out_of_range = c->Acquire(0, {2, 4});
  EXPECT_EQ(out_of_range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out_of_range.status().message().find("expert 4"),
            std::string::npos);
  auto repeated = c->Acquire(0, {3, 1, 3});
  EXPECT_EQ(repeated.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(repeated.status().message().find("repeated"), std::string::npos);
  EXPECT_EQ(c->Prefetch({0, 9}).status().code(),
            absl::StatusCode::kInvalidArgument);
  const SlotCacheCounters after = c->Snapshot();
  EXPECT_EQ(after.lookups, before.lookups);
  EXPECT_EQ(after.hits, before.hits);
  EXPECT_EQ(after.misses, before.misses);
  EXPECT_EQ(after.prefetches_issued, 0u);
  EXPECT_EQ(after.layer_lookups, before.layer_lookups);
  // Nothing was placed: only expert 1 is resident, and 2 (first in the
  // failed call) was not.
  EXPECT_EQ(Residents(*c), (std::vector<int32_t>{1, -1}));
}

TEST(SlotCacheTest, PrefetchIssuedUsefulLate) {
  auto c = MakeCache(2, 8, 3, MakeLruPolicy(), 50);
  auto p = c->Prefetch({1, 5});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, Kind::kMiss);
  EXPECT_EQ(p->slot, 0);
  // Already resident: nothing counted.
  EXPECT_EQ(c->Prefetch({1, 5})->kind, Kind::kNone);
  // Demanded while in flight: a hit that is pending, useful and late.
  c->BeginStep();
  auto got = c->Acquire(1, {5});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].kind, Kind::kHit);
  EXPECT_TRUE((*got)[0].pending);
  c->Release();
  c->CompletePrefetch({1, 5});
  // A second prefetch, completed before demand: useful, not late.
  ASSERT_EQ(c->Prefetch({1, 6})->kind, Kind::kMiss);
  c->CompletePrefetch({1, 6});
  SlotAssignment a = Touch(*c, 1, 6);
  EXPECT_EQ(a.kind, Kind::kHit);
  EXPECT_FALSE(a.pending);
  // A third, never demanded: issued only. A second demand of 6 does not
  // count it useful twice.
  ASSERT_EQ(c->Prefetch({0, 0})->kind, Kind::kMiss);
  Touch(*c, 1, 6);
  SlotCacheCounters n = c->Snapshot();
  EXPECT_EQ(n.prefetches_issued, 3u);
  EXPECT_EQ(n.prefetches_useful, 2u);
  EXPECT_EQ(n.prefetches_late, 1u);
  EXPECT_EQ(n.hits, 3u);
  EXPECT_EQ(n.lookups, 3u);
  EXPECT_EQ(n.bytes_streamed, 150u);
  EXPECT_DOUBLE_EQ(n.prefetch_accuracy(), 2.0 / 3.0);
}

TEST(SlotCacheTest, PrefetchInFlightIsProtectedUntilCompleted) {
  auto c = MakeCache(1, 8, 1, MakeLruPolicy());
  ASSERT_EQ(c->Prefetch({0, 3})->kind, Kind::kMiss);
  // The only slot is in flight: a demand miss is forced, not evicting it.
  EXPECT_EQ(Touch(*c, 0, 4).kind, Kind::kForced);
  EXPECT_EQ(c->Prefetch({0, 5})->kind, Kind::kNone);
  c->CompletePrefetch({0, 3});
  c->CompletePrefetch({0, 3});  // twice: a no-op
  SlotAssignment a = Touch(*c, 0, 4);
  EXPECT_EQ(a.kind, Kind::kMiss);
  EXPECT_EQ(a.evicted_key, (ExpertKey{0, 3}));
  SlotCacheCounters n = c->Snapshot();
  EXPECT_EQ(n.prefetches_issued, 1u);
  EXPECT_EQ(n.prefetches_useful, 0u);
}

TEST(SlotCacheTest, PerLayerCounters) {
  auto c = MakeCache(3, 4, 8, MakeLruPolicy());
  Touch(*c, 0, 1);
  Touch(*c, 0, 1);
  Touch(*c, 2, 1);
  c->BeginStep();
  ASSERT_TRUE(c->Acquire(2, {1, 2, 3}).ok());
  SlotCacheCounters n = c->Snapshot();
  EXPECT_EQ(n.layer_lookups, (std::vector<uint64_t>{2, 0, 4}));
  EXPECT_EQ(n.layer_hits, (std::vector<uint64_t>{1, 0, 1}));
  EXPECT_DOUBLE_EQ(n.layer_hit_rate(0), 0.5);
  EXPECT_DOUBLE_EQ(n.layer_hit_rate(1), 0.0);
  EXPECT_DOUBLE_EQ(n.layer_hit_rate(2), 0.25);
}

TEST(SlotCacheTest, ComputedOnHostCountsMissesWithoutTakingSlots) {
  auto c = MakeCache(2, 8, 2, MakeLruPolicy(), 100);
  Touch(*c, 1, 0);  // expert 0 of layer 1 resident in a slot
  c->BeginStep();
  ASSERT_TRUE(c->Acquire(1, {0}).ok());
  ASSERT_TRUE(c->ComputedOnHost(1, {3, 5, 6}).ok());
  c->Release();
  SlotCacheCounters n = c->Snapshot();
  EXPECT_EQ(n.lookups, 5u);
  EXPECT_EQ(n.hits, 1u);
  EXPECT_EQ(n.misses, 4u);  // the first Touch and the three host ones
  EXPECT_EQ(n.host_computed, 3u);
  EXPECT_EQ(n.bytes_host_computed, 300u);
  EXPECT_EQ(n.bytes_streamed, 100u);  // only the first Touch copied
  EXPECT_EQ(n.forced, 0u);
  EXPECT_EQ(n.layer_lookups, (std::vector<uint64_t>{0, 5}));
  EXPECT_EQ(n.layer_hits, (std::vector<uint64_t>{0, 1}));
  // No slot was taken: the second slot is still empty, and the host
  // experts are not resident.
  EXPECT_EQ(Residents(*c), (std::vector<int32_t>{0, -1}));
  EXPECT_FALSE(c->Peek({1, 3}).has_value());
}

TEST(SlotCacheTest, ComputedOnHostRejectsBadCallsAndCountsNothing) {
  auto c = MakeCache(2, 8, 2, MakeLruPolicy(), 100);
  Touch(*c, 0, 2);
  const SlotCacheCounters before = c->Snapshot();
  EXPECT_EQ(c->ComputedOnHost(2, {1}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->ComputedOnHost(0, {1, 8}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->ComputedOnHost(0, {1, 1}).code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status resident = c->ComputedOnHost(0, {1, 2});
  EXPECT_EQ(resident.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(resident.message().find("expert 2 is resident"), std::string::npos);
  const SlotCacheCounters after = c->Snapshot();
  EXPECT_EQ(after.lookups, before.lookups);
  EXPECT_EQ(after.misses, before.misses);
  EXPECT_EQ(after.host_computed, 0u);
}

TEST(SlotCacheTest, RecordBytesByTier) {
  auto c = MakeCache(1, 4, 1, MakeLruPolicy());
  c->RecordBytes(Tier::kHost, 7);
  c->RecordBytes(Tier::kDisk, 5);
  c->RecordBytes(Tier::kHost, 3);
  SlotCacheCounters n = c->Snapshot();
  EXPECT_EQ(n.bytes_by_tier[static_cast<int>(Tier::kHost)], 10u);
  EXPECT_EQ(n.bytes_by_tier[static_cast<int>(Tier::kDisk)], 5u);
}

TEST(SlotCacheTest, MinusOfTwoSnapshots) {
  auto c = MakeCache(2, 8, 2, MakeLruPolicy(), 4);
  Touch(*c, 0, 1);
  Touch(*c, 1, 1);
  const SlotCacheCounters a = c->Snapshot();
  Touch(*c, 0, 1);                // hit
  Touch(*c, 1, 2);                // miss, evicts
  c->RecordBytes(Tier::kDisk, 4);
  const SlotCacheCounters d = c->Snapshot().Minus(a);
  EXPECT_EQ(d.lookups, 2u);
  EXPECT_EQ(d.hits, 1u);
  EXPECT_EQ(d.misses, 1u);
  EXPECT_EQ(d.evictions, 1u);
  EXPECT_EQ(d.bytes_streamed, 4u);
  EXPECT_EQ(d.bytes_by_tier[static_cast<int>(Tier::kDisk)], 4u);
  EXPECT_EQ(d.layer_lookups, (std::vector<uint64_t>{1, 1}));
  EXPECT_EQ(d.layer_hits, (std::vector<uint64_t>{1, 0}));
  EXPECT_DOUBLE_EQ(d.hit_rate(), 0.5);
}

// Random steps against every policy: the counter identities hold and the
// slot table agrees with Peek after every call.
TEST(SlotCacheTest, CounterIdentitiesOnRandomSteps) {
  constexpr int32_t kLayers = 4, kExperts = 16, kSlots = 10, kK = 4;
  std::mt19937 rng(7);
  std::vector<std::vector<int32_t>> calls;
  std::vector<int32_t> layers;
  std::vector<ExpertKey> future;
  for (int i = 0; i < 2000; ++i) {
    const int32_t layer = rng() % kLayers;
    std::vector<int32_t> e;
    while (static_cast<int>(e.size()) < 1 + static_cast<int>(rng() % kK)) {
      const int32_t x = rng() % kExperts;
      if (std::find(e.begin(), e.end(), x) == e.end()) e.push_back(x);
    }
    for (int32_t x : e) future.push_back({layer, x});
    layers.push_back(layer);
    calls.push_back(e);
  }
  std::vector<std::unique_ptr<EvictionPolicy>> policies;
  policies.push_back(MakeLruPolicy());
  policies.push_back(MakeDecayedLfuPolicy(50));
  policies.push_back(MakeBeladyPolicy(future));
  policies.push_back(MakeTinyLfuPolicy({.half_life = 50, .window_fraction = 0.2}));
  policies.push_back(MakeTinyLfuPolicy());
  for (auto& policy : policies) {
    const std::string name = policy->Name();
    auto c = MakeCache(kLayers, kExperts, kSlots, std::move(policy), 3);
    uint64_t filled = 0, forced = 0;
    for (size_t i = 0; i < calls.size(); ++i) {
      c->BeginStep();
      auto got = c->Acquire(layers[i], calls[i]);
      ASSERT_TRUE(got.ok());
      for (size_t j = 0; j < got->size(); ++j) {
        const SlotAssignment& a = (*got)[j];
        if (a.kind == Kind::kForced) {
          ++forced;
          continue;
        }
        if (a.kind == Kind::kMiss) ++filled;
        ASSERT_EQ(c->Peek({layers[i], calls[i][j]}), a.slot) << name;
      }
      if (i % 3 == 0) c->Release();
    }
    SlotCacheCounters n = c->Snapshot();
    EXPECT_EQ(n.hits + n.misses, n.lookups) << name;
    EXPECT_EQ(n.lookups, future.size()) << name;
    EXPECT_EQ(n.forced, forced) << name;
    EXPECT_EQ(n.bytes_streamed, filled * 3) << name;
    EXPECT_EQ(n.bytes_forced, forced * 3) << name;
    EXPECT_EQ(n.evictions, filled - kSlots) << name;
    uint64_t layer_sum = 0;
    for (uint64_t l : n.layer_lookups) layer_sum += l;
    EXPECT_EQ(layer_sum, n.lookups) << name;
    // Every occupied slot's key maps back to it.
    for (int32_t s = 0; s < kSlots; ++s) {
      auto k = c->SlotKey(s);
      ASSERT_TRUE(k.has_value()) << name;
      EXPECT_EQ(c->Peek(*k), s) << name;
    }
  }
}

// 10^5 slots and mostly misses: a linear victim scan would take minutes,
// the list/sets take well under a second.
TEST(SlotCacheTest, ManySlotsStayCheap) {
  constexpr int32_t kLayers = 1000, kExperts = 256, kSlots = 100000;
  for (const char* name : {"lru", "lfu", "tinylfu"}) {
    auto policy = MakePolicy(name);
    ASSERT_TRUE(policy.ok());
    auto c = MakeCache(kLayers, kExperts, kSlots, std::move(*policy));
    std::mt19937 rng(1);
    for (int i = 0; i < 100000; ++i) {
      c->BeginStep();
      const int32_t base = rng() % (kExperts - 8);
      std::vector<int32_t> e = {base, base + 3, base + 7};
      ASSERT_TRUE(c->Acquire(rng() % kLayers, e).ok());
    }
    SlotCacheCounters n = c->Snapshot();
    EXPECT_EQ(n.lookups, 300000u);
    EXPECT_GT(n.evictions, 0u) << name;
  }
}


// ---- tinylfu (W-TinyLFU over exact decayed counts) ----

// One step: BeginStep, Acquire(layer, experts), Release; the kinds.
std::vector<Kind> Step(SlotCache& c, int32_t layer, std::vector<int32_t> experts) {
  c.BeginStep();
  auto got = c.Acquire(layer, experts);
  EXPECT_TRUE(got.ok()) << got.status();
  c.Release();
  std::vector<Kind> kinds;
  if (got.ok()) {
    for (const SlotAssignment& a : *got) kinds.push_back(a.kind);
  }
  return kinds;
}

int CountResident(const SlotCache& c, int32_t layer, const std::vector<int32_t>& experts) {
  int n = 0;
  for (int32_t e : experts) n += c.Peek({layer, e}).has_value() ? 1 : 0;
  return n;
}

TEST(TinyLfuTest, MakePolicyByNameAndKeyFrequency) {
  auto p = MakePolicy("tinylfu");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->Name(), "tinylfu");
  EXPECT_NE(MakePolicy("x").status().message().find("lru, lfu, tinylfu"),
            std::string::npos);
  auto host = MakePolicy(kDefaultHostTierPolicy);  // what the host tier builds
  ASSERT_TRUE(host.ok());
  EXPECT_EQ((*host)->Name(), "tinylfu");
  KeyFrequency f(2.0);
  EXPECT_EQ(f.Count({0, 1}, 0), 0.0);
  EXPECT_EQ(f.Score({0, 1}), -std::numeric_limits<double>::infinity());
  f.Touch({0, 1}, 0);
  f.Touch({0, 1}, 2);
  // 2^(-4/2) + 2^(-2/2) at access 4.
  EXPECT_NEAR(f.Count({0, 1}, 4), 0.25 + 0.5, 1e-12);
  f.Touch({1, 1}, 4);
  EXPECT_NEAR(f.Count({1, 1}, 4), 1.0, 1e-12);
  EXPECT_GT(f.Score({1, 1}), f.Score({0, 1}));  // 1.0 > 0.75 at any time
  EXPECT_EQ(f.keys(), 2u);
}

// The window's oldest key enters the main part only by beating the main
// part's least used key; a loser is the one evicted.
TEST(TinyLfuTest, WindowCandidateMustBeatTheMainVictim) {
  // 4 slots, window 1, main 3. Half-life huge: counts are plain counts.
  auto c = MakeCache(1, 16, 4,
                     MakeTinyLfuPolicy({.half_life = 1e30, .window_fraction = 0.25}));
  for (int r = 0; r < 3; ++r) {
    Step(*c, 0, {1});
    Step(*c, 0, {2});
    Step(*c, 0, {3});
  }
  Step(*c, 0, {4});  // fills the last free slot: 1 2 3 in main, 4 in window
  // 5 (count 1) needs a slot: window candidate 4 (count 1) vs main victim
  // (count 3): 4 loses and goes; 5 takes the window.
  c->BeginStep();
  auto got = c->Acquire(0, {5});
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE((*got)[0].evicted);
  EXPECT_EQ((*got)[0].evicted_key, (ExpertKey{0, 4}));
  c->Release();
  // 5 used four more times (count 5 > 3): on the next miss it wins its way
  // into the main part, evicting the least used of 1 2 3 (all 3: the least
  // recent, 1).
  for (int r = 0; r < 4; ++r) Step(*c, 0, {5});
  c->BeginStep();
  got = c->Acquire(0, {6});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].evicted_key, (ExpertKey{0, 1}));
  c->Release();
  EXPECT_EQ(CountResident(*c, 0, {2, 3, 5, 6}), 4);
}

// A key evicted keeps its count: used often, it is evicted once by a burst
// and wins its slot back at its next use (LRU forgets it).
TEST(TinyLfuTest, CountsSurviveEviction) {
  auto c = MakeCache(1, 32, 4,
                     MakeTinyLfuPolicy({.half_life = 1e30, .window_fraction = 0.25}));
  for (int r = 0; r < 5; ++r) Step(*c, 0, {0, 1, 2});
  // A step of 4 new keys: 3 of them find no free slot, so they evict the
  // window's key and main keys (every slot is needed: a step's keys are
  // protected).
  Step(*c, 0, {10, 11, 12, 13});
  EXPECT_EQ(CountResident(*c, 0, {0, 1, 2}), 0);
  // 0 comes back (count 6): it enters the window and, at the next miss,
  // beats the main part's one-off keys.
  Step(*c, 0, {0});
  Step(*c, 0, {20});
  EXPECT_TRUE(c->Peek({0, 0}).has_value());
  Step(*c, 0, {1});
  Step(*c, 0, {21});
  EXPECT_EQ(CountResident(*c, 0, {0, 1}), 2);
}

// The decode hot set, then a trace the way prefill and one odd request
// look to the cache; the hot set must survive both under tinylfu, where
// LRU loses it all.
//
// 2 layers x 64 experts, 32 slots (25%), window 4 (fraction 1/8).
// Decode: 300 tokens, each layer routes 4 of its 12 hot experts (token t:
// hot[(t + 3j) % 12], j = 0..3), so 24 hot experts of 28 main slots.
// Prefill wave: each layer acquires its 48 cold experts (16..63) once, in
// 12 micro-batch steps of 4. Odd request: 6 tokens on 4 other experts per
// layer (12..15), each used 6 times. Then decode again.
struct HotSetTrace {
  static constexpr int32_t kLayers = 2, kExperts = 64, kSlots = 32;
  static std::vector<int32_t> Hot(int t) {
    std::vector<int32_t> e;
    for (int j = 0; j < 4; ++j) e.push_back((t + 3 * j) % 12);
    return e;
  }
  static void Decode(SlotCache& c, int from, int tokens) {
    for (int t = from; t < from + tokens; ++t) {
      for (int32_t l = 0; l < kLayers; ++l) Step(c, l, Hot(t));
    }
  }
  static void PrefillWave(SlotCache& c) {
    for (int32_t l = 0; l < kLayers; ++l) {
      for (int32_t e = 16; e < 64; e += 4) Step(c, l, {e, e + 1, e + 2, e + 3});
    }
  }
  static void OddRequest(SlotCache& c) {
    for (int t = 0; t < 6; ++t) {
      for (int32_t l = 0; l < kLayers; ++l) Step(c, l, {12, 13, 14, 15});
    }
  }
  // The cache after 300 decode tokens, under tinylfu (window 4) or LRU.
  static std::unique_ptr<SlotCache> Warm(bool tiny) {
    auto c = MakeCache(kLayers, kExperts, kSlots,
                       tiny ? MakeTinyLfuPolicy({.window_fraction = 0.125})
                            : MakeLruPolicy());
    Decode(*c, 0, 300);
    return c;
  }
  static int HotResident(const SlotCache& c) {
    std::vector<int32_t> hot;
    for (int32_t e = 0; e < 12; ++e) hot.push_back(e);
    return CountResident(c, 0, hot) + CountResident(c, 1, hot);
  }
};

TEST(TinyLfuTest, PrefillWaveDoesNotFlushTheDecodeHotSet) {
  using T = HotSetTrace;
  for (const bool tiny : {true, false}) {
    auto c = T::Warm(tiny);
    ASSERT_EQ(T::HotResident(*c), 24);
    const SlotCacheCounters before = c->Snapshot();
    T::PrefillWave(*c);
    // The wave's 96 one-off keys pass through the window (and the 4 main
    // slots the hot set leaves free); tinylfu keeps every hot expert, LRU
    // none.
    EXPECT_EQ(T::HotResident(*c), tiny ? 24 : 0) << (tiny ? "tinylfu" : "lru");
    T::Decode(*c, 300, 20);
    // The wave hits nothing; the 20 decode tokens after it make 160
    // lookups: tinylfu hits them all, LRU misses the 24 hot experts once.
    const SlotCacheCounters d = c->Snapshot().Minus(before);
    EXPECT_EQ(d.hits, tiny ? 160u : 136u) << (tiny ? "tinylfu" : "lru");
  }
}

TEST(TinyLfuTest, OneOddRequestDoesNotFlushTheDecodeHotSet) {
  using T = HotSetTrace;
  for (const bool tiny : {true, false}) {
    auto c = T::Warm(tiny);
    T::OddRequest(*c);
    // 8 odd keys, each used 6 times: 4 fit in the free main slots; the
    // others need the window. None of them beats a hot expert (used ~100
    // times), so the hot set stays whole. LRU: 32 slots hold 24 + 8, so it
    // survives this one too (it is short), but not a longer or wider one.
    EXPECT_EQ(T::HotResident(*c), 24) << (tiny ? "tinylfu" : "lru");
    // A wider odd request: 6 tokens on 12 other experts per layer (48..59,
    // 4 per token in rotation). LRU's 32 slots then hold the 32 odd keys
    // (24 of these, 8 of the first request) and no hot one.
    for (int t = 0; t < 6; ++t) {
      for (int32_t l = 0; l < T::kLayers; ++l) {
        const int32_t b = 48 + 4 * (t % 3);
        Step(*c, l, {b, b + 1, b + 2, b + 3});
      }
    }
    EXPECT_EQ(T::HotResident(*c), tiny ? 24 : 0) << (tiny ? "tinylfu" : "lru");
  }
}

// A new hot set does get in: routing that moves for good is followed once
// the new experts' counts beat the old ones' decayed counts.
TEST(TinyLfuTest, FollowsALastingShiftOfTheHotSet) {
  auto c = MakeCache(1, 64, 12,
                     MakeTinyLfuPolicy({.half_life = 64, .window_fraction = 0.1}));
  for (int t = 0; t < 200; ++t) Step(*c, 0, {t % 10, (t + 5) % 10});
  EXPECT_EQ(CountResident(*c, 0, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}), 10);
  for (int t = 0; t < 400; ++t) Step(*c, 0, {30 + t % 10, 30 + (t + 5) % 10});
  EXPECT_EQ(CountResident(*c, 0, {30, 31, 32, 33, 34, 35, 36, 37, 38, 39}), 10);
}

// A step with more misses than the window costs the main part at most the
// excess, and those are its least used keys.
TEST(TinyLfuTest, AStepLargerThanTheWindowEvictsOnlyTheLeastUsed) {
  auto c = MakeCache(1, 64, 10,
                     MakeTinyLfuPolicy({.half_life = 1e30, .window_fraction = 0.2}));
  // Main 8 keys with counts 1..8 (key i used i times), window 2.
  for (int32_t i = 1; i <= 8; ++i) {
    for (int r = 0; r < i; ++r) Step(*c, 0, {i});
  }
  Step(*c, 0, {40});
  Step(*c, 0, {41});
  // 5 new keys in one step: 2 take the window's slots, 3 evict main's 3
  // least used (1, 2, 3).
  Step(*c, 0, {50, 51, 52, 53, 54});
  EXPECT_EQ(CountResident(*c, 0, {1, 2, 3}), 0);
  EXPECT_EQ(CountResident(*c, 0, {4, 5, 6, 7, 8}), 5);
  // The next step's one new key: the window holds 5 now (over its 2): its
  // oldest one-off key loses to main's least used (4, count 4) and goes.
  Step(*c, 0, {60});
  EXPECT_EQ(CountResident(*c, 0, {4, 5, 6, 7, 8}), 5);
}

TEST(SlotCacheTest, OfferPlacesWithoutALookupAndRemoveFrees) {
  auto c = MakeCache(1, 8, 2, MakeLruPolicy());
  c->BeginStep();
  auto a = c->Offer({0, 3});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, Kind::kMiss);
  EXPECT_EQ(c->Peek({0, 3}), a->slot);
  EXPECT_EQ(c->Offer({0, 3})->kind, Kind::kNone);  // resident
  ASSERT_TRUE(c->Offer({0, 4}).ok());
  // Both slots protected by this step: nothing to evict.
  EXPECT_EQ(c->Offer({0, 5})->kind, Kind::kNone);
  c->Release();
  auto b = c->Offer({0, 5});  // evicts 3, the least recent
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->evicted);
  EXPECT_EQ(b->evicted_key, (ExpertKey{0, 3}));
  EXPECT_EQ(c->Remove({0, 4}), std::optional<int32_t>(1));
  EXPECT_EQ(c->Remove({0, 4}), std::nullopt);
  EXPECT_FALSE(c->Peek({0, 4}).has_value());
  // The freed slot is used before any eviction.
  EXPECT_FALSE(c->Offer({0, 6})->evicted);
  EXPECT_EQ(c->Offer({1, 0}).status().code(), absl::StatusCode::kInvalidArgument);
  const SlotCacheCounters n = c->Snapshot();
  EXPECT_EQ(n.lookups, 0u);
  EXPECT_EQ(n.offered, 5u);          // 3, 4, 5 (refused), 5, 6
  EXPECT_EQ(n.offers_admitted, 4u);
  EXPECT_EQ(n.removed, 1u);
  EXPECT_EQ(n.evictions, 1u);
}

TEST(TinyLfuTest, OfferAdmitsOnlyWhatBeatsTheVictim) {
  auto freq = std::make_shared<KeyFrequency>(1e30);
  auto c = MakeCache(1, 16, 2,
                     MakeTinyLfuPolicy({.window_fraction = 0.5, .frequency = freq}));
  // Shared counts are fed by their owner before each lookup.
  auto use = [&](int32_t e, int times) {
    for (int r = 0; r < times; ++r) {
      freq->Touch({0, e}, c->Snapshot().lookups);
      Step(*c, 0, {e});
    }
  };
  use(1, 3);
  use(2, 3);
  for (int r = 0; r < 2; ++r) freq->Touch({0, 7}, 0);  // used twice elsewhere
  EXPECT_EQ(c->Offer({0, 7})->kind, Kind::kNone);     // 2 < 3: refused
  freq->Touch({0, 7}, 0);
  freq->Touch({0, 7}, 0);
  auto a = c->Offer({0, 7});  // 4 > 3: admitted
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, Kind::kMiss);
  EXPECT_TRUE(a->evicted);
  EXPECT_EQ(c->Snapshot().offered, 2u);
  EXPECT_EQ(c->Snapshot().offers_admitted, 1u);
}

TEST(TinyLfuTest, ForcedLookupsCount) {
  // 1 slot, protected by the step: the second expert is forced, and its
  // lookup still counts toward its frequency.
  auto c = MakeCache(1, 8, 1, MakeTinyLfuPolicy({.half_life = 1e30}));
  for (int r = 0; r < 3; ++r) {
    c->BeginStep();
    auto got = c->Acquire(0, {1, 2});
    ASSERT_TRUE(got.ok());
    EXPECT_EQ((*got)[1].kind, Kind::kForced);
    c->Release();
  }
  // 2 has 3 counted lookups against 1's 3: the window (1 slot, the whole
  // cache) is LRU, so a lone 2 takes the slot.
  EXPECT_EQ(Step(*c, 0, {2}), (std::vector<Kind>{Kind::kMiss}));
}

}  // namespace
}  // namespace sluice::memory

namespace sluice::memory {
namespace {

// A step's counters cut among three sequences of 1, 1 and 7 rows: every
// share is the floor arithmetic of its range, and the shares add up to the
// whole in every field, the per-layer ones too.
TEST(SlotCountersTest, PortionsAddUpToTheWhole) {
  SlotCacheCounters c;
  c.lookups = 100;
  c.hits = 37;
  c.bytes_by_tier[static_cast<int>(Tier::kDisk)] = 1'000'000'007;
  c.layer_lookups = {50, 50};
  c.layer_hits = {20, 17};
  const SlotCacheCounters a = c.Portion(0, 1, 9), b = c.Portion(1, 2, 9), d = c.Portion(2, 9, 9);
  EXPECT_EQ(a.lookups, 11u);  // floor(100 / 9)
  EXPECT_EQ(b.lookups, 11u);  // floor(200 / 9) - 11
  EXPECT_EQ(d.lookups, 78u);
  SlotCacheCounters sum = a;
  sum.Add(b);
  sum.Add(d);
  EXPECT_EQ(sum.lookups, c.lookups);
  EXPECT_EQ(sum.hits, c.hits);
  EXPECT_EQ(sum.bytes_by_tier, c.bytes_by_tier);
  EXPECT_EQ(sum.layer_lookups, c.layer_lookups);
  EXPECT_EQ(sum.layer_hits, c.layer_hits);
  // Large counters do not overflow: 2^62 bytes cut in thirds.
  SlotCacheCounters big;
  big.bytes_streamed = uint64_t{1} << 62;
  EXPECT_EQ(big.Portion(0, 2, 3).bytes_streamed, (uint64_t{1} << 63) / 3);
}

}  // namespace
}  // namespace sluice::memory
