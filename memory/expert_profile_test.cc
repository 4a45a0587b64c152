#include "memory/expert_profile.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "memory/expert_tiers.h"

namespace sluice::memory {
namespace {

ExpertProfile Make(int32_t layers, int32_t experts) {
  auto p = ExpertProfile::Create(layers, experts);
  EXPECT_TRUE(p.ok()) << p.status();
  return *std::move(p);
}

TEST(ExpertProfileTest, RecordsRanksAndRoundTrips) {
  ExpertProfile p = Make(2, 4);
  ASSERT_TRUE(p.Record(0, {1, 2}).ok());
  ASSERT_TRUE(p.Record(0, {2}).ok());
  ASSERT_TRUE(p.Record(1, {3, 0}).ok());
  EXPECT_EQ(p.count({0, 2}), 2u);
  // 2 first (2 uses), then the ones of 1 use in (layer, expert) order.
  EXPECT_EQ(p.Ranked(), (std::vector<ExpertKey>{{0, 2}, {0, 1}, {1, 0}, {1, 3}}));
  EXPECT_EQ(p.Record(2, {0}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.Record(0, {1, 4}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.count({0, 1}), 1u);  // the refused call counted nothing

  const std::string path = ::testing::TempDir() + "/profile.slep";
  ASSERT_TRUE(p.Save(path).ok());
  auto back = ExpertProfile::Load(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->Serialize(), p.Serialize());
  EXPECT_EQ(back->Ranked(), p.Ranked());
  EXPECT_EQ(p.Serialize().size(), 16u + 8 * 2 * 4);
}

TEST(ExpertProfileTest, MalformedFilesNameTheFault) {
  const std::string good = Make(1, 2).Serialize();
  auto error = [](std::string bytes) {
    return std::string(ExpertProfile::Parse(bytes, "p.slep").status().message());
  };
  std::string b = good;
  b[0] = 'X';
  EXPECT_EQ(error(b), "p.slep: expert profile: bad magic at offset 0");
  b = good;
  b[4] = 2;
  EXPECT_EQ(error(b), "p.slep: expert profile: unknown version 2 at offset 4");
  b = good;
  b[8] = 0;
  EXPECT_EQ(error(b), "p.slep: expert profile: bad shape 0 x 2 at offset 8");
  EXPECT_EQ(error(good.substr(0, good.size() - 1)),
            "p.slep: expert profile: size 31 is not 32 for 1 x 2 experts at offset 31");
  EXPECT_EQ(error("SLEP"),
            "p.slep: expert profile: file of 4 bytes is shorter than the header at offset 0");
  EXPECT_EQ(ExpertProfile::Load(::testing::TempDir() + "/none.slep").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ExpertProfileTest, WarmPlanSplitsTheRanking) {
  ExpertProfile p = Make(1, 8);
  for (int32_t e = 0; e < 6; ++e) {
    for (int r = 0; r <= e; ++r) ASSERT_TRUE(p.Record(0, {e}).ok());
  }
  // Ranked: 5 4 3 2 1 0 (experts 6, 7 unused).
  const WarmPlan excl = PlanWarmStart(p, 2, 3, /*exclusive=*/true);
  EXPECT_EQ(excl.device, (std::vector<ExpertKey>{{0, 5}, {0, 4}}));
  EXPECT_EQ(excl.host, (std::vector<ExpertKey>{{0, 3}, {0, 2}, {0, 1}}));
  const WarmPlan incl = PlanWarmStart(p, 2, 3, /*exclusive=*/false);
  EXPECT_EQ(incl.host, (std::vector<ExpertKey>{{0, 5}, {0, 4}, {0, 3}}));
  const WarmPlan big = PlanWarmStart(p, 5, 5, true);  // more slots than used
  EXPECT_EQ(big.device.size(), 5u);
  EXPECT_EQ(big.host, (std::vector<ExpertKey>{{0, 0}}));
}

// A restart warmed from the profile of a run reads no more from disk on its
// first tokens than the run itself did on the same tokens, where a cold
// restart reads nearly every expert.
TEST(ExpertProfileTest, AWarmedRestartStartsHot) {
  constexpr int32_t kLayers = 4, kExperts = 32, kK = 4;
  // Skewed routing: 10 hot experts per layer take most picks.
  std::mt19937 rng(11);
  auto token = [&](int32_t layer) {
    std::vector<int32_t> e;
    while (static_cast<int32_t>(e.size()) < kK) {
      const int32_t x = rng() % 4 == 0 ? static_cast<int32_t>(rng() % kExperts)
                                       : static_cast<int32_t>((layer * 7 + rng() % 10) % kExperts);
      if (std::find(e.begin(), e.end(), x) == e.end()) e.push_back(x);
    }
    return e;
  };
  std::vector<std::vector<std::vector<int32_t>>> run(300), next(5);
  for (auto& t : run) for (int32_t l = 0; l < kLayers; ++l) t.push_back(token(l));
  for (auto& t : next) for (int32_t l = 0; l < kLayers; ++l) t.push_back(token(l));

  auto tiers = [&](std::shared_ptr<KeyFrequency> f) {
    auto d = MakeTierPolicy("tinylfu", f);
    auto h = MakeTierPolicy("tinylfu", f);
    return *ExpertTiers::Create({kLayers, kExperts, 32, 48, 1, true}, std::move(*d),
                                std::move(*h), f);
  };
  auto replay = [&](ExpertTiers& t, const auto& tokens) {
    const uint64_t before = t.Snapshot().disk_reads;
    for (const auto& tok : tokens) {
      for (int32_t l = 0; l < kLayers; ++l) EXPECT_TRUE(t.Step(l, tok[l]).ok());
    }
    return t.Snapshot().disk_reads - before;
  };
  auto warm_f = std::make_shared<KeyFrequency>(16384);
  auto warm = tiers(warm_f);
  ExpertProfile profile = Make(kLayers, kExperts);
  for (const auto& tok : run) {
    for (int32_t l = 0; l < kLayers; ++l) ASSERT_TRUE(profile.Record(l, tok[l]).ok());
  }
  replay(*warm, run);
  const uint64_t warm_reads = replay(*warm, next);

  auto restart_f = std::make_shared<KeyFrequency>(16384);
  auto restarted = tiers(restart_f);
  SeedFrequency(profile, *restart_f);
  const WarmPlan plan = PlanWarmStart(profile, 32, 48 - 4, /*exclusive=*/true);
  ASSERT_TRUE(restarted->Preload(plan.device, plan.host).ok());
  EXPECT_EQ(restarted->InBoth(), 0);
  EXPECT_EQ(restarted->Snapshot().lookups, 0u);  // preloading is no lookup
  const uint64_t restarted_reads = replay(*restarted, next);

  auto cold = tiers(std::make_shared<KeyFrequency>(16384));
  const uint64_t cold_reads = replay(*cold, next);
  std::printf("disk reads over 5 tokens: warm %llu, warmed restart %llu, cold %llu\n",
              static_cast<unsigned long long>(warm_reads),
              static_cast<unsigned long long>(restarted_reads),
              static_cast<unsigned long long>(cold_reads));
  EXPECT_LE(restarted_reads, warm_reads);
  EXPECT_GT(cold_reads, 3 * restarted_reads);  // measured: 12 against 46
}

}  // namespace
}  // namespace sluice::memory
