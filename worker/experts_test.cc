#include "worker/experts.h"

#include "gtest/gtest.h"

namespace sluice::worker {
namespace {

memory::SlotCacheCounters Counters(uint64_t scale) {
  memory::SlotCacheCounters c;
  c.lookups = 8 * scale;
  c.hits = 5 * scale;
  c.misses = 3 * scale;
  c.forced = 1 * scale;
  c.host_computed = 1 * scale;
  c.bytes_host_computed = 1000 * scale;
  c.evictions = 2 * scale;
  c.prefetches_issued = 4 * scale;
  c.prefetches_useful = 1 * scale;
  c.bytes_streamed = 200 * scale;
  c.bytes_by_tier = {300 * scale, 100 * scale};
  c.layer_lookups = {4 * scale, 4 * scale};
  c.layer_hits = {4 * scale, 1 * scale};
  return c;
}

TEST(ExpertsTest, SlotCacheStatsCarryEveryFigure) {
  ExpertStreamStats s;
  s.streaming = true;
  s.policy = "lfu";
  s.slots_capacity = 12;
  s.experts = 64;
  s.slot_bytes = 1000;
  s.arena_bytes = 12000;
  s.host_tier_bytes = 5000;
  s.counters = Counters(1);
  s.miss_policy = "cost";
  s.copy_bytes_per_s = 4.5e10;
  s.host_bytes_per_s = 2.75e10;
  sluice::v1::SlotCacheStats p;
  ToSlotCacheStats(s, &p);
  EXPECT_TRUE(p.streaming());
  EXPECT_EQ(p.policy(), "lfu");
  EXPECT_EQ(p.miss_policy(), "cost");
  EXPECT_DOUBLE_EQ(p.copy_bytes_per_second(), 4.5e10);
  EXPECT_DOUBLE_EQ(p.host_bytes_per_second(), 2.75e10);
  EXPECT_EQ(p.host_computed(), 1u);
  EXPECT_EQ(p.bytes_host_computed(), 1000u);
  EXPECT_EQ(p.slots_capacity(), 12u);
  EXPECT_EQ(p.arena_bytes(), 12000u);
  EXPECT_EQ(p.lookups(), 8u);
  EXPECT_EQ(p.bytes_streamed(), 200u);
  EXPECT_EQ(p.bytes_host(), 300u);
  EXPECT_EQ(p.bytes_disk(), 100u);
  ASSERT_EQ(p.layer_hit_ratio_size(), 2);
  EXPECT_DOUBLE_EQ(p.layer_hit_ratio(0), 1.0);
  EXPECT_DOUBLE_EQ(p.layer_hit_ratio(1), 0.25);
  // Nothing streams (a CPU backend): no miss policy is reported.
  sluice::v1::SlotCacheStats idle;
  ToSlotCacheStats(ExpertStreamStats{}, &idle);
  EXPECT_EQ(idle.miss_policy(), "");
}

// Start at 1x, two tokens at 2x and 3x: the request is the 2x difference,
// each token a 1x one.
// slots_capacity was slots_total: a renamed field keeps its number, or
// supervisors and workers of the two versions would misread each other.
TEST(ExpertsTest, SlotsCapacityKeepsTheOldFieldNumber) {
  const google::protobuf::FieldDescriptor* f =
      sluice::v1::SlotCacheStats::descriptor()->FindFieldByName("slots_capacity");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->number(), 1);
  EXPECT_EQ(sluice::v1::SlotCacheStats::descriptor()->FindFieldByName("slots_total"), nullptr);
}

TEST(ExpertsTest, TrackerGivesTheRequestAndEachToken) {
  RequestExpertTracker t(Counters(1), /*per_token=*/true);
  t.Token(Counters(2));
  t.Token(Counters(3));
  sluice::v1::ExpertRequestStats r = t.Finish(Counters(3));
  EXPECT_EQ(r.lookups(), 16u);
  EXPECT_EQ(r.hits(), 10u);
  EXPECT_EQ(r.misses(), 6u);
  EXPECT_DOUBLE_EQ(r.hit_rate(), 0.625);
  EXPECT_EQ(r.forced(), 2u);
  EXPECT_EQ(r.host_computed(), 2u);
  EXPECT_EQ(r.bytes_host_computed(), 2000u);
  EXPECT_EQ(r.bytes_host(), 600u);
  EXPECT_EQ(r.bytes_disk(), 200u);
  EXPECT_DOUBLE_EQ(r.prefetch_accuracy(), 0.25);
  ASSERT_EQ(r.tokens_size(), 2);
  EXPECT_EQ(r.tokens(1).hits(), 5u);
  EXPECT_EQ(r.tokens(1).misses(), 3u);
  RequestExpertTracker quiet(Counters(1), /*per_token=*/false);
  quiet.Token(Counters(2));
  EXPECT_EQ(quiet.Finish(Counters(2)).tokens_size(), 0);
}

}  // namespace
}  // namespace sluice::worker
