#include "tools/slotsim_lib.h"

#include <algorithm>
#include <string>

#include "gtest/gtest.h"

namespace sluice::slotsim {
namespace {

using memory::RoutingTrace;
using memory::RoutingTraceHeader;

RoutingTrace Synthetic(const std::string& kind, RoutingTraceHeader shape,
                       int64_t tokens, uint64_t seed = 1) {
  auto t = MakeSyntheticTrace(kind, shape, tokens, seed);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : RoutingTrace{};
}

SimResult Run(const RoutingTrace& t, const SimConfig& c) {
  auto r = Simulate(t, c);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SimResult{};
}

SimResult Replay(const RoutingTrace& t, const std::string& policy, int64_t slots,
              int64_t host_slots = -1, uint64_t slice_bytes = 1) {
  SimConfig c;
  c.policy = policy;
  c.slots = slots;
  c.host_slots = host_slots;
  c.slice_bytes = slice_bytes;
  return Run(t, c);
}

TEST(SlotsimTest, CyclicTraceDefeatsLruButNotBelady) {
  // 16 experts, 4 per token: every expert returns after 4 tokens; with 8
  // slots (half) the cycle never fits, so LRU always evicts what comes next.
  const RoutingTrace t = Synthetic("cyclic", {2, 16, 4}, 40);
  ASSERT_EQ(t.size(), 80u);
  EXPECT_EQ(t.Experts(2)[0], 4);  // token 1, layer 0: experts 4..7
  const SimResult lru = Replay(t, "lru", 16);
  const SimResult min = Replay(t, "belady", 16);
  EXPECT_EQ(lru.counters.hits, 0u);
  EXPECT_EQ(lru.counters.lookups, 320u);
  // MIN on a loop of 32 keys through 16 slots: after the 32 cold misses
  // it hits 128 of the 288 lookups (44%; deterministic, checked by hand
  // against the loop bound (c-1)/(n-1) = 48% less the step's protection).
  EXPECT_EQ(min.counters.hits, 128u);
  std::printf("%s", FormatTable({lru, min}).c_str());
}

TEST(SlotsimTest, UniformTraceAtAQuarterHitsAboutAQuarter) {
  const RoutingTrace t = Synthetic("uniform", {4, 64, 4}, 2000, 42);
  auto slots = SlotsForFraction(t.header, 0.25);
  ASSERT_TRUE(slots.ok());
  EXPECT_EQ(*slots, 64);
  for (const char* policy : {"lru", "lfu"}) {
    const SimResult r = Replay(t, policy, *slots);
    std::printf("%s uniform 25%%: hit rate %.4f\n", policy,
                r.counters.hit_rate());
    // A little under 25%: the cold start, and a layer's share of the
    // arena is at its lowest when its own step comes (the other layers'
    // misses have just evicted).
    EXPECT_NEAR(r.counters.hit_rate(), 0.25, 0.03) << policy;
    EXPECT_LE(r.layer_min_hit_rate, r.counters.hit_rate());
    EXPECT_GE(r.layer_max_hit_rate, r.counters.hit_rate());
    EXPECT_EQ(r.counters.forced, 0u);
  }
  // LRU shares the arena evenly between the layers; LFU's frequency memory
  // lets some layers' lucky experts stay (16-27% on this trace), so the
  // per-layer bound is for LRU only.
  {
    const SimResult r = Replay(t, "lru", *slots);
    EXPECT_NEAR(r.layer_min_hit_rate, 0.25, 0.03);
    EXPECT_NEAR(r.layer_max_hit_rate, 0.25, 0.03);
  }
}

TEST(SlotsimTest, ZipfRoutingHitsMoreThanUniform) {
  const RoutingTrace zipf = Synthetic("zipf:1.0", {4, 64, 4}, 1000, 3);
  const RoutingTrace uni = Synthetic("uniform", {4, 64, 4}, 1000, 3);
  const double z = Replay(zipf, "lfu", 64).counters.hit_rate();
  const double u = Replay(uni, "lfu", 64).counters.hit_rate();
  std::printf("lfu 25%%: zipf %.4f uniform %.4f\n", z, u);
  EXPECT_GT(z, u + 0.2);
}

TEST(SlotsimTest, HostTierSplitsBytesBetweenHostAndDisk) {
  // 1 layer, 16 experts, 4 per token, 40 tokens: 160 lookups. No device
  // slots, so all 160 are forced misses.
  const RoutingTrace t = Synthetic("cyclic", {1, 16, 4}, 40);
  // No host tier: everything from host RAM.
  SimResult r = Replay(t, "lru", 0, -1, 1000);
  EXPECT_EQ(r.counters.forced, 160u);
  EXPECT_EQ(r.counters.exhausted, 40u);
  EXPECT_DOUBLE_EQ(r.host_bytes_per_token(), 4000.0);
  EXPECT_DOUBLE_EQ(r.disk_bytes_per_token(), 0.0);
  // A host tier holding every expert: the first cycle (16) from disk, the
  // other 144 from host.
  r = Replay(t, "lru", 0, 16, 1000);
  EXPECT_DOUBLE_EQ(r.disk_bytes_per_token(), 16 * 1000 / 40.0);
  EXPECT_DOUBLE_EQ(r.host_bytes_per_token(), 144 * 1000 / 40.0);
  // Half of them under LRU on a cycle: every read from disk.
  r = Replay(t, "lru", 0, 8, 1000);
  EXPECT_DOUBLE_EQ(r.host_bytes_per_token(), 0.0);
  EXPECT_DOUBLE_EQ(r.disk_bytes_per_token(), 4000.0);
  // Device hits move nothing: all 16 resident after the cold cycle.
  r = Replay(t, "lru", 16, 16, 1000);
  EXPECT_EQ(r.counters.hits, 144u);
  EXPECT_DOUBLE_EQ(r.disk_bytes_per_token(), 16 * 1000 / 40.0);
  EXPECT_DOUBLE_EQ(r.host_bytes_per_token(), 0.0);
}

TEST(SlotsimTest, SlotsForFractionRoundsUpAndCaps) {
  RoutingTraceHeader h{10, 100, 8};
  EXPECT_EQ(*SlotsForFraction(h, 0.1), 100);
  EXPECT_EQ(*SlotsForFraction(h, 1.0), 1000);
  EXPECT_EQ(*SlotsForFraction(h, 2.0), 1000);
  EXPECT_EQ(*SlotsForFraction(h, 0.0005), 1);
  EXPECT_EQ(*SlotsForFraction(h, 0), 0);
  EXPECT_EQ(SlotsForFraction(h, -0.5).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SlotsimTest, BadConfigsAreRefused) {
  const RoutingTrace t = Synthetic("uniform", {1, 8, 2}, 4);
  SimConfig c;
  c.policy = "mru";
  auto r = Simulate(t, c);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("lru, lfu, tinylfu, belady"), std::string::npos);
  c.policy = "lru";
  c.slots = -1;
  EXPECT_EQ(Simulate(t, c).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeSyntheticTrace("gauss", {1, 8, 2}, 4, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeSyntheticTrace("zipf:x", {1, 8, 2}, 4, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeSyntheticTrace("uniform", {1, 8, 9}, 4, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SlotsimTest, TableAndJsonCarryTheFigures) {
  const RoutingTrace t = Synthetic("cyclic", {1, 16, 4}, 40);
  const std::vector<SimResult> rs = {Replay(t, "lru", 16, 16, 1000),
                                     Replay(t, "belady", 8)};
  const std::string table = FormatTable(rs);
  EXPECT_NE(table.find("policy"), std::string::npos);
  EXPECT_NE(table.find("lru           16        16   90.00%"),
            std::string::npos)
      << table;
  const std::string json = FormatJson(rs);
  EXPECT_EQ(json.front(), '[');
  EXPECT_NE(json.find("\"policy\": \"lru\", \"slots\": 16, \"host_slots\": 16"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"hit_rate\": 0.900000"), std::string::npos) << json;
  EXPECT_NE(json.find("\"disk_bytes_per_token\": 400, "), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"policy\": \"belady\", \"slots\": 8, \"host_slots\": -1"),
            std::string::npos)
      << json;
}


SimResult ReplayTiers(const RoutingTrace& t, const std::string& policy,
                      const std::string& host_policy, bool exclusive,
                      int64_t slots, int64_t host_slots) {
  SimConfig c;
  c.policy = policy;
  c.host_policy = host_policy;
  c.exclusive = exclusive;
  c.slots = slots;
  c.host_slots = host_slots;
  return Run(t, c);
}

TEST(SlotsimTest, RealisticTraceHasItsKnobs) {
  const RoutingTrace t =
      Synthetic("realistic:zipf=1.0,reuse=0.45,spread=1", {8, 64, 4}, 400, 5);
  ASSERT_EQ(t.size(), 8u * 400);
  // Share of a token's picks that its layer's previous token also made:
  // the reuse knob plus the popular experts' chance repeats.
  uint64_t repeats = 0, picks = 0;
  for (size_t i = 8; i < t.size(); ++i) {
    const auto now = t.Experts(i), before = t.Experts(i - 8);
    for (int32_t e : now) {
      repeats += std::find(before.begin(), before.end(), e) != before.end();
      ++picks;
    }
  }
  const double share = static_cast<double>(repeats) / picks;
  std::printf("realistic: %.3f of picks repeat the previous token's\n", share);
  EXPECT_GT(share, 0.45);
  EXPECT_LT(share, 0.75);
  // Per-layer exponents: the last layer is more concentrated than the first
  // (spread 1: exponents 0.5 and 1.5), so LRU hits more there.
  const SimResult r = Replay(t, "lru", 8 * 16);
  EXPECT_LT(r.counters.layer_hit_rate(0), r.counters.layer_hit_rate(7));
  EXPECT_EQ(MakeSyntheticTrace("realistic:reuse=2", {1, 8, 2}, 1, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_NE(MakeSyntheticTrace("mixed:bogus=1", {1, 8, 2}, 1, 1)
                .status().message().find("valid: zipf=S"),
            std::string::npos);
}

TEST(SlotsimTest, MixedTraceInsertsLayerMajorWaves) {
  const RoutingTrace t = Synthetic("mixed:wave=10,every=4", {2, 32, 4}, 9, 2);
  // 9 decode tokens, waves before tokens 4 and 8: 2 x 10 x 2 records more.
  ASSERT_EQ(t.size(), 9u * 2 + 2u * 10 * 2);
  // Records 8..17 are the first wave's layer 0, tokens 4..13.
  EXPECT_EQ(t.layer[8], 0u);
  EXPECT_EQ(t.layer[17], 0u);
  EXPECT_EQ(t.layer[18], 1u);
  EXPECT_EQ(t.token[8], 4u);
  EXPECT_EQ(t.token[17], 13u);
  EXPECT_EQ(t.token[28], 14u);  // the decode token after the wave
  // A wave replays as one step per layer (the union of its experts), and
  // Belady's future follows those steps: it stays the bound.
  const SimResult lru = Replay(t, "lru", 16);
  const SimResult min = Replay(t, "belady", 16);
  EXPECT_LT(lru.counters.lookups, t.experts.size());  // unions, not records
  EXPECT_EQ(min.counters.lookups, lru.counters.lookups);
  EXPECT_GE(min.counters.hits, lru.counters.hits);
}

// Exclusive tiers keep the device's experts out of the host tier, so more
// distinct experts stay off disk than inclusive ones hold.
TEST(SlotsimTest, ExclusiveTiersReadLessFromDisk) {
  const RoutingTrace t = Synthetic("realistic", {8, 64, 4}, 600, 3);
  const int64_t quarter = 8 * 64 / 4;
  for (const char* host : {"lru", "tinylfu"}) {
    const SimResult incl = ReplayTiers(t, "lru", host, false, quarter, quarter);
    const SimResult excl = ReplayTiers(t, "lru", host, true, quarter, quarter);
    std::printf("%s host: off disk %.4f inclusive, %.4f exclusive\n", host,
                incl.off_disk_rate, excl.off_disk_rate);
    EXPECT_GT(excl.off_disk_rate, incl.off_disk_rate + 0.05) << host;
    EXPECT_GT(excl.demoted, 0u);
    EXPECT_EQ(incl.demoted, 0u);
    // The device sees the same lookups either way.
    EXPECT_EQ(incl.counters.hits, excl.counters.hits) << host;
  }
}

// Decode with prefill waves of other requests: a tinylfu host tier keeps
// decode's hot set through the waves and reads less from disk than LRU.
TEST(SlotsimTest, TinyLfuHostTierOutlastsPrefillWaves) {
  const RoutingTrace t = Synthetic("mixed:wave=256,every=32", {8, 64, 4}, 512, 4);
  const int64_t tenth = 8 * 64 / 10, quarter = 8 * 64 / 4;
  const SimResult lru = ReplayTiers(t, "lru", "lru", true, tenth, quarter);
  const SimResult tiny = ReplayTiers(t, "lru", "tinylfu", true, tenth, quarter);
  std::printf("mixed: host hit %.4f lru, %.4f tinylfu\n", lru.host_hit_rate,
              tiny.host_hit_rate);
  EXPECT_GT(tiny.host_hit_rate, lru.host_hit_rate + 0.05);
  EXPECT_LT(tiny.disk_bytes_per_token(), lru.disk_bytes_per_token());
}

// Two streams of 2 layers x 8 experts, k = 2: step t of the interleaved
// trace holds both streams' token t, layer by layer, so the replay looks
// up each layer's union once (3 distinct where the streams share 1).
TEST(SlotsimTest, InterleavedStreamsShareEachStepsExperts) {
  RoutingTrace a, b;
  a.header = b.header = {2, 8, 2};
  for (uint32_t t = 0; t < 3; ++t) {
    for (uint32_t l = 0; l < 2; ++l) {
      const int32_t x[2] = {0, static_cast<int32_t>(1 + t)};
      const int32_t y[2] = {0, static_cast<int32_t>(5 + l)};
      a.Add(t, l, x);
      b.Add(10 + t, l, y);  // token ids need not start at 0
    }
  }
  b.Add(13, 0, std::vector<int32_t>{3, 4});  // one more token, half routed: an error
  const RoutingTrace parts[] = {a, b};
  EXPECT_EQ(InterleaveStreams(parts).status().message(),
            "streams: a token has no record for layer 1 (not a decode trace)");
  b.Add(13, 1, std::vector<int32_t>{3, 4});
  const RoutingTrace both[] = {a, b};
  auto t = InterleaveStreams(both);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 12u);  // 3 steps (the shorter stream) x 2 layers x 2 streams
  EXPECT_EQ(t->token[0], 0u);
  EXPECT_EQ(t->token[1], 1u);  // stream 1's first token
  EXPECT_EQ(t->layer[1], 0u);
  EXPECT_EQ(t->layer[2], 1u);
  EXPECT_EQ(t->token[4], 2u);  // step 1 of stream 0
  EXPECT_EQ(t->Experts(3)[1], 6);  // stream 1, layer 1
  // Each (step, layer) lookup is the union: 3 experts, 6 steps of layers.
  const SimResult r = Replay(*t, "lru", 16);
  EXPECT_EQ(r.counters.lookups, 18u);
  EXPECT_DOUBLE_EQ(r.tokens, 6);  // generated tokens: both streams'
  EXPECT_EQ(InterleaveStreams({}).status().message(), "streams: none given");
}

TEST(SlotsimTest, SplitStreamsCutsATraceIntoConsecutiveRequests) {
  const RoutingTrace t = Synthetic("uniform", {3, 16, 2}, 10);
  auto parts = SplitStreams(t, 3);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 3u);
  for (const RoutingTrace& p : *parts) EXPECT_EQ(p.size(), 9u);  // 3 tokens x 3 layers
  // Stream 2 starts at the trace's token 6.
  EXPECT_EQ(std::vector<int32_t>((*parts)[2].Experts(0).begin(), (*parts)[2].Experts(0).end()),
            std::vector<int32_t>(t.Experts(18).begin(), t.Experts(18).end()));
  EXPECT_EQ(SplitStreams(t, 11).status().message(),
            "streams: 11 streams of a trace of 10 tokens");
}

}  // namespace
}  // namespace sluice::slotsim
