#include "memory/fit_planner.h"

#include <string>

#include "gtest/gtest.h"

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
  in.disk_bytes_per_s = 1.5e9;
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
  EXPECT_NE(table.find("1.50 GB/s"), std::string::npos) << table;
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

}  // namespace
}  // namespace sluice::memory
