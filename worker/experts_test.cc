#include "worker/experts.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
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
  c.skipped = 5 * scale;
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
  EXPECT_EQ(p.skipped(), 5u);
  EXPECT_EQ(p.slots_capacity(), 12u);
  EXPECT_EQ(p.arena_bytes(), 12000u);
  EXPECT_EQ(p.lookups(), 8u);
  EXPECT_EQ(p.bytes_streamed(), 200u);
  EXPECT_EQ(p.bytes_host(), 300u);
  EXPECT_EQ(p.bytes_disk(), 100u);
  ASSERT_EQ(p.layer_hit_ratio_size(), 2);
  EXPECT_DOUBLE_EQ(p.layer_hit_ratio(0), 1.0);
  EXPECT_DOUBLE_EQ(p.layer_hit_ratio(1), 0.25);
  EXPECT_EQ(p.tiers(), "");  // no host tier
  s.host_tier = true;
  s.exclusive_tiers = true;
  s.host_tier_counters.lookups = 9;
  s.host_tier_counters.hits = 6;
  s.host_tier_counters.offers_admitted = 5;
  s.host_tier_counters.removed = 4;
  ToSlotCacheStats(s, &p);
  EXPECT_EQ(p.tiers(), "exclusive");
  EXPECT_EQ(p.host_tier_lookups(), 9u);
  EXPECT_EQ(p.host_tier_hits(), 6u);
  EXPECT_EQ(p.host_tier_demoted(), 5u);
  EXPECT_EQ(p.host_tier_promoted(), 4u);
  // Nothing streams (a CPU backend): no miss policy is reported.
  sluice::v1::SlotCacheStats idle;
  ToSlotCacheStats(ExpertStreamStats{}, &idle);
  EXPECT_EQ(idle.miss_policy(), "");
}

// slots_capacity was slots_total: a renamed field keeps its number, or
// supervisors and workers of the two versions would misread each other.
TEST(ExpertsTest, SlotsCapacityKeepsTheOldFieldNumber) {
  const google::protobuf::FieldDescriptor* f =
      sluice::v1::SlotCacheStats::descriptor()->FindFieldByName("slots_capacity");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->number(), 1);
  EXPECT_EQ(sluice::v1::SlotCacheStats::descriptor()->FindFieldByName("slots_total"), nullptr);
}

// Shares of two passes of 1x counters each, a token after each: the request
// is their sum (2x), each token one share.
TEST(ExpertsTest, TrackerGivesTheRequestAndEachToken) {
  RequestExpertTracker t(/*per_token=*/true);
  t.Add(Counters(1));
  t.Token();
  t.Add(Counters(1));
  t.Token();
  sluice::v1::ExpertRequestStats r = t.Finish();
  EXPECT_EQ(r.lookups(), 16u);
  EXPECT_EQ(r.hits(), 10u);
  EXPECT_EQ(r.misses(), 6u);
  EXPECT_DOUBLE_EQ(r.hit_rate(), 0.625);
  EXPECT_EQ(r.forced(), 2u);
  EXPECT_EQ(r.host_computed(), 2u);
  EXPECT_EQ(r.bytes_host_computed(), 2000u);
  EXPECT_EQ(r.skipped(), 10u);
  EXPECT_EQ(r.bytes_host(), 600u);
  EXPECT_EQ(r.bytes_disk(), 200u);
  EXPECT_DOUBLE_EQ(r.prefetch_accuracy(), 0.25);
  ASSERT_EQ(r.tokens_size(), 2);
  EXPECT_EQ(r.tokens(1).hits(), 5u);
  EXPECT_EQ(r.tokens(1).misses(), 3u);
  RequestExpertTracker quiet(/*per_token=*/false);
  quiet.Add(Counters(1));
  quiet.Token();
  EXPECT_EQ(quiet.Finish().tokens_size(), 0);
  EXPECT_EQ(quiet.Finish().lookups(), 8u);
}

std::string Temp(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

TEST(OpenExpertProfileTest, AFileOfThisShapeIsReadAnythingElseStartsColdWithANote) {
  std::string note;
  const std::string missing = Temp("missing.profile");
  auto cold = OpenExpertProfile(missing, 2, 4, &note);
  ASSERT_TRUE(cold.ok()) << cold.status();
  EXPECT_TRUE(cold->Ranked().empty());
  EXPECT_EQ(note, absl::StrCat("expert profile ", missing, ": none yet; starting cold"));

  const std::string bad = Temp("bad.profile");
  std::ofstream(bad) << "not a profile";
  auto ignored = OpenExpertProfile(bad, 2, 4, &note);
  ASSERT_TRUE(ignored.ok());
  EXPECT_TRUE(ignored->Ranked().empty());
  EXPECT_EQ(note.rfind("expert profile ignored, starting cold: " + bad, 0), 0u) << note;

  const std::string good = Temp("good.profile");
  auto p = memory::ExpertProfile::Create(2, 4);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p->Record(1, {0, 3}).ok());
  ASSERT_TRUE(p->Record(1, {3}).ok());
  ASSERT_TRUE(p->Save(good).ok());
  auto read = OpenExpertProfile(good, 2, 4, &note);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->count({1, 3}), 2u);
  EXPECT_EQ(note, absl::StrCat("expert profile ", good, ": 2 experts used, 3 uses"));
  auto other = OpenExpertProfile(good, 3, 4, &note);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->Ranked().empty());
  EXPECT_EQ(note, absl::StrCat("expert profile ", good, " ignored, starting cold: it counts 2 "
                               "layers x 4 experts, the model has 3 x 4"));

  EXPECT_EQ(OpenExpertProfile(good, 2, 0, &note).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sluice::worker
