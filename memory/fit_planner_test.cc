#include "memory/fit_planner.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loader/testing/gguf_bytes.h"
#include "memory/expert_profile.h"

namespace sluice::memory {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

// A model of round numbers: 10 GiB dense, 100 experts of 1 GiB, 1 GiB of
// state (one session), 1 GiB workspace.
FitInputs Inputs(uint64_t device_free, uint64_t host_available) {
  FitInputs in;
  in.model.dense_bytes = 10 * kGiB;
  in.model.expert_bytes = 100 * kGiB;
  in.model.slot_bytes = kGiB;
  in.model.experts = 100;
  in.model.layers = 10;  // 10 experts a layer, 2 used a token
  in.model.expert_layers = 10;
  in.model.experts_used = 2;
  in.model.state_fixed_bytes = 0;
  in.model.state_bytes_per_token = 256 * 1024;
  in.model.context = 4096;
  in.model.sessions = 1;
  in.model.workspace_bytes = kGiB;
  in.device = {true, 140 * kGiB, device_free};
  in.host = {125 * kGiB, host_available};
  return in;
}

TEST(FitPlannerTest, MarginsAndStaging) {
  EXPECT_EQ(DeviceMarginBytes(8 * kGiB), 512 * kMiB);
  EXPECT_EQ(DeviceMarginBytes(100 * kGiB), 100 * kGiB / 100 * 3);
  EXPECT_EQ(HostMarginBytes(16 * kGiB), 2 * kGiB);
  EXPECT_EQ(HostMarginBytes(200 * kGiB), 10 * kGiB);
  EXPECT_EQ(StagingBytes(kMiB), 64 * kMiB);
  EXPECT_EQ(StagingBytes(100 * kMiB), 400 * kMiB);
}

// 112 GiB + 4.2 GiB margin fit in 130 GiB free: every expert resident.
TEST(FitPlannerTest, AllResidentWhenItFitsWithTheMargin) {
  auto p = PlanFit(Inputs(130 * kGiB, 100 * kGiB));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->mode, FitMode::kAllResident);
  EXPECT_FALSE(p->streaming());
  EXPECT_EQ(p->slots, 100);
  EXPECT_EQ(p->arena_bytes, 100 * kGiB);
  EXPECT_EQ(p->device_need_bytes, 112 * kGiB + DeviceMarginBytes(140 * kGiB));
  EXPECT_EQ(p->host_tier_bytes, 0u);
  EXPECT_EQ(p->page_cache_bytes, 0u);
}

// 112 GiB fit in 114 GiB free but not with the 4.2 GiB margin: the largest
// arena instead, floor((114 - 12 - 4.2) / 1) = 97 slots; the experts fit
// in host RAM, so the mapping is registered.
TEST(FitPlannerTest, DefaultIsTheLargestArenaThatFits) {
  auto p = PlanFit(Inputs(114 * kGiB, 120 * kGiB));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->mode, FitMode::kArenaRegistered);
  EXPECT_EQ(p->slots, 97);
  EXPECT_EQ(p->arena_bytes, 97 * kGiB);
  EXPECT_EQ(p->page_cache_bytes, 100 * kGiB);
  EXPECT_EQ(p->host_need_bytes, 100 * kGiB + HostMarginBytes(125 * kGiB));
  EXPECT_EQ(p->staging_bytes, 0u);
}

// Experts (100 GiB) do not fit in 60 GiB available: pinned host tier of
// what is left after the margin and the staging buffers.
TEST(FitPlannerTest, HostTierAndDiskWhenExpertsExceedHostRam) {
  FitInputs in = Inputs(130 * kGiB, 60 * kGiB);
  in.request.arena_fraction = 0.25;
  auto p = PlanFit(in);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->mode, FitMode::kArenaHostTier);
  EXPECT_EQ(p->slots, 25);
  EXPECT_EQ(p->staging_bytes, 4 * kGiB);
  EXPECT_EQ(p->host_tier_bytes, 60 * kGiB - HostMarginBytes(125 * kGiB) - 4 * kGiB);
  EXPECT_EQ(p->host_need_bytes, 60 * kGiB);
  const std::string table = p->Table();
  EXPECT_NE(table.find("arena+host-tier+disk"), std::string::npos) << table;
  EXPECT_NE(table.find("25 (25.0% of experts)"), std::string::npos) << table;
}

TEST(FitPlannerTest, ExplicitSlotsAndFractionAreHonoured) {
  FitInputs in = Inputs(130 * kGiB, 120 * kGiB);
  in.request.slots = 10;
  auto p = PlanFit(in);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->slots, 10);
  EXPECT_EQ(p->mode, FitMode::kArenaRegistered);
  in.request.slots = 500;  // capped at every expert, still streaming
  p = PlanFit(in);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->slots, 100);
  EXPECT_TRUE(p->streaming());
  in.request.slots = -1;
  in.request.arena_fraction = 0.101;  // ceil(10.1)
  p = PlanFit(in);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->slots, 11);
}

// 99 slots need 99 + 12 + 4.2 GiB > 114 GiB: refused with the numbers and
// the 97 slots that fit.
TEST(FitPlannerTest, DeviceOversubscribedIsRefusedWithWhatFits) {
  FitInputs in = Inputs(114 * kGiB, 120 * kGiB);
  in.request.slots = 99;
  auto p = PlanFit(in);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string m(p.status().message());
  EXPECT_NE(m.find("device memory oversubscribed: the plan needs 115.20 GiB (dense 10.00 GiB + "
                   "experts 99.00 GiB [99 slots x 1.00 GiB] + KV/state 1.00 GiB [1 x 1.00 GiB for "
                   "4096 tokens] + workspace 1.00 GiB + margin 4.20 GiB) but the device has "
                   "114.00 GiB free of 140.00 GiB; at most 97 expert slots fit "
                   "(--expert_slots=97"),
            std::string::npos)
      << m;
}

// Not even an empty arena fits beside 1 GiB of state: the message names
// the context that does.
TEST(FitPlannerTest, NoArenaFitsSuggestsAShorterContext) {
  FitInputs in = Inputs(16 * kGiB, 120 * kGiB);
  in.device.total_bytes = 16 * kGiB;
  in.model.context = 32768;  // 8 GiB of KV
  auto p = PlanFit(in);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  // free 16 - dense 10 - workspace 1 - margin 0.5 = 4.5 GiB / 256 KiB.
  EXPECT_NE(p.status().message().find("use a context of at most 18432 tokens"), std::string::npos)
      << p.status().message();
}

TEST(FitPlannerTest, HostOversubscribedIsRefusedWithATierThatFits) {
  FitInputs in = Inputs(130 * kGiB, 60 * kGiB);
  in.request.slots = 10;
  in.request.host_tier_bytes = 80 * kGiB;
  auto p = PlanFit(in);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  const uint64_t fits = 60 * kGiB - HostMarginBytes(125 * kGiB) - 4 * kGiB;
  EXPECT_NE(p.status().message().find("host memory oversubscribed: the plan needs 90.25 GiB "
                                      "(pinned host tier 80.00 GiB + staging 4.00 GiB"),
            std::string::npos)
      << p.status().message();
  EXPECT_NE(p.status().message().find("fits: --host_tier_bytes=" + std::to_string(fits)),
            std::string::npos)
      << p.status().message();
}

TEST(FitPlannerTest, BadRequestsAreInvalidArgument) {
  FitInputs in = Inputs(130 * kGiB, 120 * kGiB);
  in.request.slots = -2;
  EXPECT_EQ(PlanFit(in).status().code(), absl::StatusCode::kInvalidArgument);
  in.request.slots = -1;
  in.request.arena_fraction = 1.5;
  EXPECT_EQ(PlanFit(in).status().message(),
            "--expert_arena_fraction=1.5: must be in (0, 1] (0: the fit planner chooses)");
  in.request.arena_fraction = 0.5;
  in.model.experts = 0;
  EXPECT_EQ(PlanFit(in).status().message(),
            "an expert arena was asked for, but the model has no routed experts");
}

// Without a device to ask, only the host is checked: the default keeps
// every expert resident and an explicit arena is taken as asked.
TEST(FitPlannerTest, UnknownDeviceChecksTheHostOnly) {
  FitInputs in = Inputs(0, 120 * kGiB);
  in.device = {};
  auto p = PlanFit(in);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->mode, FitMode::kAllResident);
  EXPECT_EQ(p->device_margin_bytes, 0u);
  EXPECT_NE(p->Table().find("unknown (not checked)"), std::string::npos);
}

// Eight sequences of 4,096 tokens, each with 2 MiB of recurrent state and
// 256 KiB of KV a token: 1.00 GiB + 2 MiB each, and the table says so; 14
// would fit beside the resident experts ((130 - 115.2) GiB / 1.002 GiB).
TEST(FitPlannerTest, PerSequenceStateIsInThePlan) {
  FitInputs in = Inputs(130 * kGiB, 100 * kGiB);
  in.model.sessions = 8;
  in.model.state_fixed_bytes = 2 * kMiB;
  auto p = PlanFit(in);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->mode, FitMode::kAllResident);
  EXPECT_EQ(p->sequences, 8);
  EXPECT_EQ(p->context, 4096);
  EXPECT_EQ(p->state_fixed_bytes_per_sequence, 2 * kMiB);
  EXPECT_EQ(p->kv_bytes_per_token, 256u * 1024);
  EXPECT_EQ(p->kv_positions_per_sequence, 4096);
  EXPECT_EQ(p->state_bytes_per_sequence, kGiB + 2 * kMiB);
  EXPECT_EQ(p->state_bytes, 8 * (kGiB + 2 * kMiB));
  EXPECT_EQ(p->kv_blocks, 0);
  EXPECT_EQ(p->sequences_fit, 14);
  const std::string t = p->Table();
  EXPECT_NE(t.find("sequences              8 x 4096 tokens (14 would fit)\n"), std::string::npos)
      << t;
  EXPECT_NE(t.find("  per sequence         1.00 GiB = KV 256.0 KiB/token x 4096 + recurrent 2.0 "
                   "MiB\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("  KV/state             8.02 GiB (8 x 1.00 GiB)\n"), std::string::npos) << t;
  EXPECT_EQ(t.find("KV blocks"), std::string::npos) << t;
}

// 32 sequences of 4,096 tokens need 32 GiB of KV each holding its whole
// context, which pushes the 100 GiB of experts into an arena; a pool of
// 16,384 positions needs 4 GiB plus a 2 MiB page of rounding for each of a
// sequence's 4 KV buffers, and every expert stays resident.
TEST(FitPlannerTest, AKvPoolCountsThePoolNotSequencesTimesContext) {
  FitInputs in = Inputs(130 * kGiB, 100 * kGiB);
  in.model.sessions = 32;
  in.model.state_fixed_bytes = 2 * kMiB;
  in.model.kv_ranges = 4;
  auto whole = PlanFit(in);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->state_bytes, 32 * (kGiB + 2 * kMiB));
  EXPECT_NE(whole->mode, FitMode::kAllResident);
  in.model.kv_pool_tokens = 16384;
  in.model.kv_page_bytes = kDeviceKvPageBytes;
  auto pool = PlanFit(in);
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ(pool->state_bytes, 16384 * 256 * 1024ull + 32 * (2 * kMiB + 4 * 2 * kMiB));
  EXPECT_EQ(pool->kv_pool_tokens, 16384);
  EXPECT_EQ(pool->kv_page_slack_bytes, 32u * 4 * 2 * kMiB);
  EXPECT_EQ(pool->mode, FitMode::kAllResident);
  const std::string t = pool->Table();
  EXPECT_NE(t.find("  KV pool              16384 tokens x 256.0 KiB + pages rounding 256.0 MiB\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("  KV/state             4.31 GiB (pool + 32 x recurrent 2.0 MiB)\n"),
            std::string::npos)
      << t;
}

// In blocks of 16 positions a context of 4,100 holds 4,112 (257 blocks a
// sequence).
TEST(FitPlannerTest, KvBlocksRoundTheContextUp) {
  FitInputs in = Inputs(130 * kGiB, 100 * kGiB);
  in.model.sessions = 2;
  in.model.context = 4100;
  in.model.kv_block_tokens = 16;
  auto p = PlanFit(in);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->kv_positions_per_sequence, 4112);
  EXPECT_EQ(p->kv_blocks, 2 * 257);
  EXPECT_EQ(p->state_bytes_per_sequence, 4112u * 256 * 1024);
  EXPECT_EQ(p->state_bytes, 2u * 4112 * 256 * 1024);
  EXPECT_NE(p->Table().find("  KV blocks            514 x 16 tokens\n"), std::string::npos)
      << p->Table();
}

// 200 sequences of 1 GiB do not fit in 114 GiB beside 15.2 GiB of dense,
// workspace and margin, even with no arena: the refusal gives the context
// that fits for 200 and the 98 sequences that fit at 4,096 tokens.
TEST(FitPlannerTest, TooManySequencesAreRefusedWithWhatFits) {
  FitInputs in = Inputs(114 * kGiB, 120 * kGiB);
  in.model.sessions = 200;
  in.request.slots = 0;
  auto p = PlanFit(in);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string m(p.status().message());
  EXPECT_NE(m.find("KV/state 200.00 GiB [200 x 1.00 GiB for 4096 tokens]"), std::string::npos)
      << m;
  EXPECT_NE(m.find("no expert arena fits beside the KV/state: use a context of at most 2023 "
                   "tokens (--context_length) or at most 98 sequences of 4096 tokens, with 0 "
                   "slots"),
            std::string::npos)
      << m;
  // Recurrent state alone (no KV a token) too large for 200: only fewer
  // sequences help.
  in.model.state_bytes_per_token = 0;
  in.model.state_fixed_bytes = kGiB;
  p = PlanFit(in);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(p.status().message().find("no expert arena fits beside the KV/state: use at most 98 "
                                      "sequences of 4096 tokens, with 0 slots"),
            std::string::npos)
      << p.status().message();
  // Not even one sequence beside the dense weights.
  in.model.state_fixed_bytes = 100 * kGiB;
  p = PlanFit(in);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(p.status().message().find("; one sequence's state (100.00 GiB) does not fit beside "
                                      "the dense weights and workspace"),
            std::string::npos)
      << p.status().message();
}

TEST(FitPlannerTest, FormatBytes) {
  EXPECT_EQ(FormatBytes(3 * kGiB / 2), "1.50 GiB");
  EXPECT_EQ(FormatBytes(512 * kMiB), "512.0 MiB");
  EXPECT_EQ(FormatBytes(98304), "96.0 KiB");
  EXPECT_EQ(FormatBytes(1000), "1000 B");
}

// Rates of round GiB figures: disk 1 GiB/s, PCIe 16 GiB/s, HBM 1 TiB/s.
Rates GiBRates() {
  Rates r;
  r.disk_bytes_per_s = kGiB;
  r.pcie_bytes_per_s = 16.0 * kGiB;
  r.hbm_bytes_per_s = 1024.0 * kGiB;
  return r;
}

// A 25-slot arena and a pinned host tier of 1 GiB slots: exclusive tiers
// (unless asked otherwise), 50 GiB, of which 10 slots (one layer's
// experts) stage disk reads: 40 host slots; 35 experts only on disk.
// Inclusive: 40 GiB, 40 slots, 15 beyond the arena's.
absl::StatusOr<Plan> HostTierPlan(config::TierMode tiers = config::TierMode::kExclusive) {
  FitInputs in = Inputs(130 * kGiB, 70 * kGiB);
  in.request.slots = 25;
  in.request.host_tier_bytes = (tiers == config::TierMode::kExclusive ? 50 : 40) * kGiB;
  in.request.tiers = tiers;
  return PlanFit(in);
}

TEST(FitPlannerTest, DefaultRatesAreTheH200Figures) {
  const Rates r;
  EXPECT_EQ(r.disk_bytes_per_s, 1.5e9);
  EXPECT_EQ(r.pcie_bytes_per_s, 55.2e9);
  EXPECT_EQ(r.hbm_bytes_per_s, 4.0e12);
}

// Disk: dense 10 + arena 25 + host tier 40 GiB at 1 GiB/s = 75 s; to the
// device: dense 10 + arena 25 GiB at 16 GiB/s = 2.1875 s.
TEST(FitPlannerTest, ColdStartFillsTheArenaAndTheHostTier) {
  auto p = HostTierPlan();
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->mode, FitMode::kArenaHostTier);
  EXPECT_EQ(p->host_slots(), 40);
  const ColdStart c = ColdStartOf(*p, GiBRates());
  EXPECT_EQ(c.disk_bytes(), 75 * kGiB);
  EXPECT_EQ(c.device_bytes(), 35 * kGiB);
  EXPECT_DOUBLE_EQ(c.disk_seconds(), 75.0);
  EXPECT_DOUBLE_EQ(c.copy_seconds(), 2.1875);
  EXPECT_DOUBLE_EQ(c.seconds(), 77.1875);
  EXPECT_EQ(c.Table(),
            "cold start             77.19 s until the tiers are warm = disk 75.00 s + "
            "host->device 2.19 s (nothing in the page cache at start)\n"
            "  read from disk       75.00 GiB / 1.07 GB/s = 75.00 s (dense 10.00 GiB + arena "
            "and host tier 65.00 GiB)\n"
            "  copy to device       35.00 GiB / 17.18 GB/s = 2.19 s (dense 10.00 GiB + arena "
            "25.00 GiB)\n");
}

// Inclusive tiers: the 40 GiB tier also holds the arena's 25 experts, so
// it adds 15; 40 GiB of experts come off the disk, not 65. Uniform shares
// 0.25 / 0.15 / 0.60.
TEST(FitPlannerTest, InclusiveTiersShareTheArenasExperts) {
  auto p = HostTierPlan(config::TierMode::kInclusive);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->host_slots(), 15);
  const ColdStart c = ColdStartOf(*p, GiBRates());
  EXPECT_EQ(c.expert_disk_bytes, 40 * kGiB);
  EXPECT_DOUBLE_EQ(c.seconds(), 50 + 35.0 / 16);
  const TierShares s = UniformShares(*p);
  EXPECT_DOUBLE_EQ(s.device, 0.25);
  EXPECT_DOUBLE_EQ(s.host, 0.15);
  EXPECT_DOUBLE_EQ(s.disk, 0.60);
}

// Registered (97 slots) and all-resident plans keep every expert in the
// page cache or on the device: all 100 GiB come off the disk.
TEST(FitPlannerTest, ColdStartReadsEveryExpertWithoutAHostTier) {
  auto registered = PlanFit(Inputs(114 * kGiB, 120 * kGiB));
  ASSERT_TRUE(registered.ok()) << registered.status();
  ASSERT_EQ(registered->mode, FitMode::kArenaRegistered);
  ColdStart c = ColdStartOf(*registered, GiBRates());
  EXPECT_EQ(c.disk_bytes(), 110 * kGiB);
  EXPECT_EQ(c.device_bytes(), 107 * kGiB);
  EXPECT_DOUBLE_EQ(c.seconds(), 110 + 107.0 / 16);
  EXPECT_NE(c.Table().find("(dense 10.00 GiB + every expert 100.00 GiB)"), std::string::npos)
      << c.Table();
  auto resident = PlanFit(Inputs(130 * kGiB, 100 * kGiB));
  ASSERT_TRUE(resident.ok()) << resident.status();
  c = ColdStartOf(*resident, GiBRates());
  EXPECT_EQ(c.disk_bytes(), 110 * kGiB);
  EXPECT_EQ(c.device_bytes(), 110 * kGiB);
}

// Uniform routing over the host-tier plan: device 25/100, host 40/100,
// disk 35/100 of 10 layers x 2 experts x 1 GiB = 20 GiB a token:
//   disk 7 GiB / 1 GiB/s = 7 s; PCIe (8 + 7) GiB / 16 GiB/s = 0.9375 s;
//   HBM (10 + 20) GiB / 1024 GiB/s = 0.029296875 s.
TEST(FitPlannerTest, UniformDecodeEstimate) {
  auto p = HostTierPlan();
  ASSERT_TRUE(p.ok()) << p.status();
  const TierShares s = UniformShares(*p);
  EXPECT_DOUBLE_EQ(s.device, 0.25);
  EXPECT_DOUBLE_EQ(s.host, 0.40);
  EXPECT_DOUBLE_EQ(s.disk, 0.35);
  EXPECT_EQ(s.routing, "uniform routing: a tier's share = its slots / 100 experts");
  const DecodeEstimate d = DecodeEstimateOf(*p, s, GiBRates());
  EXPECT_DOUBLE_EQ(d.routed_bytes(), 20.0 * kGiB);
  EXPECT_DOUBLE_EQ(d.disk_seconds(), 7.0);
  EXPECT_DOUBLE_EQ(d.pcie_seconds(), 0.9375);
  EXPECT_DOUBLE_EQ(d.hbm_seconds(), 0.029296875);
  EXPECT_DOUBLE_EQ(d.tokens_per_s(), 1 / 7.966796875);
  EXPECT_EQ(d.Table(),
            "decode (upper bound)   0.1 tok/s = 1 / 7.97 s; uniform routing: a tier's share = "
            "its slots / 100 experts\n"
            "  routed per token     10 layers x 2 experts x 1.00 GiB = 20.00 GiB\n"
            "  device hits          25.0% = 5.00 GiB\n"
            "  host (pinned tier)   40.0% = 8.00 GiB\n"
            "  disk                 35.0% = 7.00 GiB\n"
            "  time per token       disk 7.00 s + PCIe 937.50 ms + HBM 29.30 ms = 7.97 s\n"
            "  disk reads           7.00 GiB / 1.07 GB/s = 7.00 s\n"
            "  PCIe (host + disk)   15.00 GiB / 17.18 GB/s = 937.50 ms\n"
            "  HBM (dense + routed) 30.00 GiB / 1.10 TB/s = 29.30 ms\n");
}

// Registered: every expert outside the arena is served from the page
// cache (3 of 100 at 97 slots), none from disk; all resident: every
// lookup a device hit.
TEST(FitPlannerTest, UniformSharesOfTheOtherModes) {
  auto registered = PlanFit(Inputs(114 * kGiB, 120 * kGiB));
  ASSERT_TRUE(registered.ok()) << registered.status();
  TierShares s = UniformShares(*registered);
  EXPECT_DOUBLE_EQ(s.device, 0.97);
  EXPECT_DOUBLE_EQ(s.host, 0.03);
  EXPECT_EQ(s.disk, 0.0);
  EXPECT_NE(DecodeEstimateOf(*registered, s, GiBRates()).Table().find(
                "  host (page cache)    3.0% = 614.4 MiB\n"),
            std::string::npos);
  auto resident = PlanFit(Inputs(130 * kGiB, 100 * kGiB));
  ASSERT_TRUE(resident.ok()) << resident.status();
  s = UniformShares(*resident);
  EXPECT_EQ(s.device, 1.0);
  EXPECT_EQ(s.host + s.disk, 0.0);
  // Only HBM: (10 + 20) GiB / 1024 GiB/s.
  EXPECT_DOUBLE_EQ(DecodeEstimateOf(*resident, s, GiBRates()).seconds(), 30.0 / 1024);
}

// 100 experts' counts: the hottest 25 take 25 x 6 = 150 of 200 lookups,
// the next 40 take 40, the rest 10. Shares 0.75 / 0.20 / 0.05 of 20 GiB:
// disk 1 GiB / 1 GiB/s = 1 s; PCIe 5 GiB / 16 GiB/s = 0.3125 s.
TEST(FitPlannerTest, ProfileDecodeEstimate) {
  auto p = HostTierPlan();
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<uint64_t> counts(25, 6);
  counts.insert(counts.end(), 50, 1);
  counts.insert(counts.end(), 25, 0);
  std::reverse(counts.begin(), counts.end());  // any order
  const TierShares s = ProfileShares(*p, counts);
  EXPECT_DOUBLE_EQ(s.device, 0.75);
  EXPECT_DOUBLE_EQ(s.host, 0.20);
  EXPECT_DOUBLE_EQ(s.disk, 0.05);
  EXPECT_EQ(s.routing,
            "200 lookups; the hottest 25 experts on the device, the next 40 on the host");
  const DecodeEstimate d = DecodeEstimateOf(*p, s, GiBRates());
  EXPECT_DOUBLE_EQ(d.disk_seconds(), 1.0);
  EXPECT_DOUBLE_EQ(d.pcie_seconds(), 0.3125);
  EXPECT_DOUBLE_EQ(d.seconds(), 1.3125 + 0.029296875);
}

// The same counts from a saved profile of the model's shape (10 layers x
// 10 experts); another shape, an empty profile or no file is an error that
// names the file.
TEST(FitPlannerTest, ProfileSharesOfAFile) {
  auto p = HostTierPlan();
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string dir = sluice::testing::MakeTempDir();
  auto profile = ExpertProfile::Create(10, 10);
  ASSERT_TRUE(profile.ok()) << profile.status();
  ASSERT_TRUE(profile->Save(dir + "/empty.slep").ok());
  const std::vector<int32_t> all = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(profile->Record(0, all).ok());
    ASSERT_TRUE(profile->Record(1, all).ok());
    ASSERT_TRUE(profile->Record(2, {0, 1, 2, 3, 4}).ok());  // 25 experts x 6
  }
  for (int32_t layer = 3; layer < 8; ++layer) ASSERT_TRUE(profile->Record(layer, all).ok());
  ASSERT_TRUE(profile->Save(dir + "/p.slep").ok());
  auto s = ProfileSharesOfFile(*p, dir + "/p.slep");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_DOUBLE_EQ(s->device, 0.75);
  EXPECT_DOUBLE_EQ(s->host, 0.20);
  EXPECT_DOUBLE_EQ(s->disk, 0.05);
  EXPECT_EQ(s->routing, "routing of profile " + dir +
                            "/p.slep: 200 lookups; the hottest 25 experts on the device, the "
                            "next 40 on the host");
  EXPECT_EQ(ProfileSharesOfFile(*p, dir + "/empty.slep").status().message(),
            dir + "/empty.slep: the profile counts no lookups");
  auto other = ExpertProfile::Create(10, 8);
  ASSERT_TRUE(other.ok() && other->Save(dir + "/other.slep").ok());
  EXPECT_EQ(ProfileSharesOfFile(*p, dir + "/other.slep").status().message(),
            dir + "/other.slep: a profile of 10 layers x 8 experts; the model has 10 layers x 10 "
                  "experts");
  EXPECT_EQ(ProfileSharesOfFile(*p, dir + "/none.slep").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace sluice::memory
