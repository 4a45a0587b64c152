// `sluicectl plan` on the micro model written by mkmodel: the figures the
// planner prints, a refusal with the slots that fit, all without a daemon.
#include <sstream>
#include <string>

#include "clients/sluicectl.h"
#include "gtest/gtest.h"
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

}  // namespace
}  // namespace sluice::testing
