#include "memory/expert_plan.h"

#include "gtest/gtest.h"

namespace sluice::memory {
namespace {

// A model without routed experts: the default plan keeps "every expert"
// resident, and the configuration says so (with nothing to miss, the miss
// policy becomes copy, the only one the backend takes without streaming);
// asking for an arena is refused.
TEST(ExpertPlanTest, WritesThePlanIntoTheConfig) {
  TensorTable empty;
  config::ExpertConfig experts;
  experts.miss_policy = config::MissPolicy::kCost;
  experts.host_threads = 4;
  auto plan = PlanExperts(empty, /*context_length=*/16, {true, 8ull << 30, 8ull << 30},
                          {16ull << 30, 16ull << 30}, &experts);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->mode, FitMode::kAllResident);
  EXPECT_EQ(experts.slots, -1);
  EXPECT_EQ(experts.miss_policy, config::MissPolicy::kCopy);
  EXPECT_EQ(experts.host_threads, 4);
  experts.arena_fraction = 0.5;
  EXPECT_EQ(PlanExperts(empty, 16, {}, {16ull << 30, 16ull << 30}, &experts).status().message(),
            "an expert arena was asked for, but the model has no routed experts");
}

}  // namespace
}  // namespace sluice::memory
