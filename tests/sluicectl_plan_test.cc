// `sluicectl plan` on the micro model written by mkmodel: the figures the
// planner prints, a refusal with the slots that fit, the cold-start time
// and the decode-rate bound, all without a daemon.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "clients/sluicectl.h"
#include "gtest/gtest.h"
#include "memory/expert_profile.h"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

class PlanCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path = WriteMicroModel(MakeTempDir("plan"));
    ASSERT_TRUE(path.ok()) << path.status();
    model_ = *path;
  }
  std::string model_;
};

// micro: 32 experts of 96 KiB; 600 MiB of device leaves room for every
// expert beside the 512 MiB margin, so the default keeps them resident.
TEST_F(PlanCliTest, DefaultPlanIsAllResident) {
  std::ostringstream out, err;
  ASSERT_EQ(ctl::Run({"plan", model_, "--device_memory=600M", "--host_memory=16G",
                      "--context_length=512"},
                     out, err),
            0)
      << err.str();
  const std::string t = out.str();
  EXPECT_NE(t.find("context                512 tokens x 1 session(s)\n"), std::string::npos) << t;
  EXPECT_NE(t.find("mode                   all-resident\n"), std::string::npos) << t;
  EXPECT_NE(t.find("routed experts         32 (one slot 96.0 KiB)\n"), std::string::npos) << t;
  EXPECT_NE(t.find("device                 600.0 MiB free of 600.0 MiB\n"), std::string::npos)
      << t;
  EXPECT_NE(t.find("  experts              3.0 MiB\n"), std::string::npos) << t;
}

TEST_F(PlanCliTest, ArenaFractionStreamsFromTheRegisteredMapping) {
  std::ostringstream out, err;
  ASSERT_EQ(ctl::Run({"plan", model_, "--device_memory=600M", "--host_memory=16G",
                      "--expert_arena_fraction=0.25"},
                     out, err),
            0)
      << err.str();
  EXPECT_NE(out.str().find("mode                   arena+registered\n"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("device slots           8 (25.0% of experts)\n"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("  page cache kept      3.0 MiB\n"), std::string::npos) << out.str();
}

// 524 MiB of device: the margin (512 MiB), the dense weights, state and
// workspace (about 10.4 MiB) leave room for 16 of the 32 slots asked for;
// the refusal gives the numbers and what fits.
TEST_F(PlanCliTest, OversubscribedDeviceIsRefused) {
  std::ostringstream out, err;
  EXPECT_EQ(ctl::Run({"plan", model_, "--device_memory=524M", "--host_memory=16G",
                      "--context_length=64", "--expert_slots=32"},
                     out, err),
            1);
  EXPECT_NE(err.str().find("sluicectl: plan refused: device memory oversubscribed"),
            std::string::npos)
      << err.str();
  EXPECT_NE(err.str().find("the plan needs 525.5 MiB (dense 1.7 MiB + experts 3.0 MiB [32 slots x "
                           "96.0 KiB]"),
            std::string::npos)
      << err.str();
  EXPECT_NE(err.str().find("but the device has 524.0 MiB free of 524.0 MiB; at most 16 expert "
                           "slots fit (--expert_slots=16, arena fraction 0.5000)"),
            std::string::npos)
      << err.str();
  EXPECT_EQ(out.str(), "");
}

// micro: 4 layers x 8 experts of 96 KiB (98,304 B), 2 used a token; dense
// 1,820,896 B. An 8-slot arena (25%) and an 18-slot host tier
// (1,769,472 B), exclusive tiers: 8 slots stage disk reads, 10 hold
// experts.
std::vector<std::string> TieredPlan(const std::string& model) {
  return {"plan",
          model,
          "--device_memory=600M",
          "--host_memory=16G",
          "--context_length=512",
          "--expert_arena_fraction=0.25",
          "--host_tier_bytes=1769472",
          "--expert_tiers=exclusive",
          "--disk_bytes_per_s=1e9",
          "--pcie_bytes_per_s=50e9",
          "--hbm_bytes_per_s=2e12"};
}

// Cold start: disk 1,820,896 + 8 x 98,304 + 10 x 98,304 = 3,590,368 B at
// 1 GB/s = 3.590 ms; to the device 1,820,896 + 786,432 B at 50 GB/s =
// 52.1 us.
// Decode, uniform: 4 x 2 x 96 KiB = 768 KiB a token, 8/32 on the device,
// 10/32 host, 14/32 disk: disk 344,064 B / 1 GB/s = 344.1 us, PCIe
// 589,824 B / 50 GB/s = 11.8 us, HBM 2,607,328 B / 2 TB/s = 1.3 us;
// 1 / 357.16 us = 2799.8 tok/s.
TEST_F(PlanCliTest, ColdStartAndUniformDecodeRate) {
  std::ostringstream out, err;
  ASSERT_EQ(ctl::Run(TieredPlan(model_), out, err), 0) << err.str();
  const std::string t = out.str();
  for (const char* line : {
           "cold start             3.64 ms until the tiers are warm = disk 3.59 ms + "
           "host->device 52.1 us (nothing in the page cache at start)\n",
           "  read from disk       3.4 MiB / 1.00 GB/s = 3.59 ms (dense 1.7 MiB + arena and "
           "host tier 1.7 MiB)\n",
           "  copy to device       2.5 MiB / 50.00 GB/s = 52.1 us (dense 1.7 MiB + arena 768.0 "
           "KiB)\n",
           "decode (upper bound)   2799.8 tok/s = 1 / 357.2 us; uniform routing: a tier's share "
           "= its slots / 32 experts\n",
           "  routed per token     4 layers x 2 experts x 96.0 KiB = 768.0 KiB\n",
           "  device hits          25.0% = 192.0 KiB\n",
           "  host (pinned tier)   31.2% = 240.0 KiB\n",
           "  disk                 43.8% = 336.0 KiB\n",
           "  time per token       disk 344.1 us + PCIe 11.8 us + HBM 1.3 us = 357.2 us\n",
           "  disk reads           336.0 KiB / 1.00 GB/s = 344.1 us\n",
           "  PCIe (host + disk)   576.0 KiB / 50.00 GB/s = 11.8 us\n",
           "  HBM (dense + routed) 2.5 MiB / 2.00 TB/s = 1.3 us\n"}) {
    EXPECT_NE(t.find(line), std::string::npos) << line << "\nnot in:\n" << t;
  }
}

// A profile of 100 lookups: 8 experts used 10 times (80), 20 once. The 8
// hottest (the arena) take 80%, the next 10 (the host tier) 10%, the disk
// 10%: disk 78,643 B / 1 GB/s = 78.6 us, PCIe 157,286 B / 50 GB/s =
// 3.1 us, HBM 1.3 us; 1 / 83.09 us = 12034.8 tok/s.
TEST_F(PlanCliTest, DecodeRateFromAProfile) {
  auto profile = memory::ExpertProfile::Create(4, 8);
  ASSERT_TRUE(profile.ok()) << profile.status();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(profile->Record(0, {0, 1, 2, 3, 4, 5, 6, 7}).ok());
  ASSERT_TRUE(profile->Record(1, {0, 1, 2, 3, 4, 5, 6, 7}).ok());
  ASSERT_TRUE(profile->Record(2, {0, 1, 2, 3, 4, 5, 6, 7}).ok());
  ASSERT_TRUE(profile->Record(3, {0, 1, 2, 3}).ok());
  const std::string path = MakeTempDir("plan_profile") + "/experts.slep";
  ASSERT_TRUE(profile->Save(path).ok());
  std::vector<std::string> args = TieredPlan(model_);
  args.push_back("--expert_profile=" + path);
  std::ostringstream out, err;
  ASSERT_EQ(ctl::Run(args, out, err), 0) << err.str();
  const std::string t = out.str();
  for (const std::string& line : {
           "decode (upper bound)   12034.8 tok/s = 1 / 83.1 us; routing of profile " + path +
               ": 100 lookups; the hottest 8 experts on the device, the next 10 on the host\n",
           std::string("  device hits          80.0% = 614.4 KiB\n"),
           std::string("  host (pinned tier)   10.0% = 76.8 KiB\n"),
           std::string("  disk                 10.0% = 76.8 KiB\n"),
           std::string("  time per token       disk 78.6 us + PCIe 3.1 us + HBM 1.3 us = 83.1 "
                       "us\n")}) {
    EXPECT_NE(t.find(line), std::string::npos) << line << "\nnot in:\n" << t;
  }
}

// A profile that cannot be used is a usage error naming the flag and the
// file; nothing is printed on `out`.
TEST_F(PlanCliTest, BadProfileIsAUsageError) {
  const std::string dir = MakeTempDir("plan_bad_profile");
  std::vector<std::string> args = TieredPlan(model_);
  args.push_back("--expert_profile=" + dir + "/none.slep");
  std::ostringstream out, err;
  EXPECT_EQ(ctl::Run(args, out, err), 2);
  EXPECT_EQ(err.str().find("sluicectl: plan: --expert_profile: " + dir +
                           "/none.slep: cannot open expert profile"),
            0u)
      << err.str();
  EXPECT_EQ(out.str(), "");
  auto other = memory::ExpertProfile::Create(4, 16);
  ASSERT_TRUE(other.ok() && other->Save(dir + "/other.slep").ok());
  args.back() = "--expert_profile=" + dir + "/other.slep";
  std::ostringstream out2, err2;
  EXPECT_EQ(ctl::Run(args, out2, err2), 2);
  EXPECT_EQ(err2.str(), "sluicectl: plan: --expert_profile: " + dir +
                            "/other.slep: a profile of 4 layers x 16 experts; the model has 4 "
                            "layers x 8 experts\n");
}

// Inclusive tiers (named: sluiced's default is exclusive), a 1 MiB host
// tier: its 10 slots also hold the arena's 8 experts and add 2: 2/32 of the
// lookups from the host, 22/32 from disk; the disk reads the larger tier,
// 1 MiB, not arena + tier.
TEST_F(PlanCliTest, InclusiveTiersAddOnlyTheExpertsBeyondTheArena) {
  std::vector<std::string> args = TieredPlan(model_);
  *std::find(args.begin(), args.end(), "--expert_tiers=exclusive") = "--expert_tiers=inclusive";
  *std::find(args.begin(), args.end(), "--host_tier_bytes=1769472") = "--host_tier_bytes=1M";
  std::ostringstream out, err;
  ASSERT_EQ(ctl::Run(args, out, err), 0) << err.str();
  const std::string t = out.str();
  for (const char* line : {"  host (pinned tier)   6.2% = 48.0 KiB\n",
                           "  disk                 68.8% = 528.0 KiB\n",
                           "(dense 1.7 MiB + arena and host tier 1.0 MiB)\n"}) {
    EXPECT_NE(t.find(line), std::string::npos) << line << "\nnot in:\n" << t;
  }
}

}  // namespace
}  // namespace sluice::testing
