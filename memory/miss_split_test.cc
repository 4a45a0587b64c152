#include "memory/miss_split.h"

#include <vector>

#include "gtest/gtest.h"

namespace sluice::memory {
namespace {

// 1 GB/s both ways and 1 MB experts: each expert costs 1 ms on either path.
MissSplitOptions Even(MissPolicy p, double fixed_s) {
  MissSplitOptions o;
  o.policy = p;
  o.device_bytes_per_s = 1e9;
  o.host_bytes_per_s = 1e9;
  o.host_fixed_s = fixed_s;
  o.learning_rate = 0.5;
  o.explore_every = 0;
  return o;
}

constexpr uint64_t kMb = 1000000;

TEST(MissSplitTest, ParsesTheThreePoliciesAndNamesThem) {
  for (const char* name : {"copy", "host", "cost"}) {
    auto p = ParseMissPolicy(name);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(MissPolicyName(*p), name);
  }
  auto bad = ParseMissPolicy("cpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("\"cpu\""), std::string::npos);
  EXPECT_NE(bad.status().message().find("copy, host or cost"),
            std::string::npos);
}

TEST(MissSplitTest, CopyNeverSplitsAndHostTakesEveryReachableMiss) {
  MissSplitter copy(Even(MissPolicy::kCopy, 0));
  EXPECT_EQ(copy.HostShare(6, 6, kMb), 0);
  MissSplitter host(Even(MissPolicy::kHost, 0));
  EXPECT_EQ(host.HostShare(6, 6, kMb), 6);
  EXPECT_EQ(host.HostShare(6, 4, kMb), 4);  // two are not in host RAM
  EXPECT_EQ(host.HostShare(3, 9, kMb), 3);  // never more than the misses
  EXPECT_EQ(host.HostShare(0, 0, kMb), 0);
}

TEST(MissSplitTest, CostBalancesEqualPathsHalfAndHalf) {
  // 6 misses: n = 3 finishes both in 3 ms; 2 or 4 leave one path 4 ms.
  MissSplitter s(Even(MissPolicy::kCost, 0));
  EXPECT_EQ(s.HostShare(6, 6, kMb), 3);
  // Only two reachable: both go to the host (4 ms instead of 6).
  EXPECT_EQ(s.HostShare(6, 2, kMb), 2);
}

TEST(MissSplitTest, SavingIsTheBestSplitsGainOverCopyingAll) {
  // Equal paths, 6 misses: 6 ms copied, 3 ms split.
  MissSplitter s(Even(MissPolicy::kCost, 0));
  EXPECT_DOUBLE_EQ(s.Saving(6, 6, kMb), 3e-3);
  EXPECT_DOUBLE_EQ(s.Saving(6, 0, kMb), 0);  // nothing in host RAM
  EXPECT_DOUBLE_EQ(s.Saving(0, 0, kMb), 0);
  // A 1.5 ms fixed cost: the best split (2) takes 4 ms, 2 less than 6.
  MissSplitter f(Even(MissPolicy::kCost, 1.5e-3));
  EXPECT_DOUBLE_EQ(f.Saving(6, 6, kMb), 2e-3);
  EXPECT_DOUBLE_EQ(f.Saving(1, 1, kMb), 0);
  MissSplitter copy(Even(MissPolicy::kCopy, 0));
  EXPECT_DOUBLE_EQ(copy.Saving(6, 6, kMb), 0);
}

TEST(MissSplitTest, CostChargesTheHostsFixedCost) {
  // Fixed 1.5 ms per host call: n=1 max(5, 2.5), n=2 max(4, 3.5),
  // n=3 max(3, 4.5): two is best.
  MissSplitter s(Even(MissPolicy::kCost, 1.5e-3));
  EXPECT_EQ(s.HostShare(6, 6, kMb), 2);
  // One miss: the host's 2.5 ms loses to the device's 1 ms.
  EXPECT_EQ(s.HostShare(1, 1, kMb), 0);
}

TEST(MissSplitTest, CostPrefersTheDeviceOnATie) {
  // Two misses, fixed 1 ms: n=0 takes 2 ms, n=1 max(1, 2) = 2 ms too.
  MissSplitter s(Even(MissPolicy::kCost, 1e-3));
  EXPECT_EQ(s.HostShare(2, 2, kMb), 0);
}

TEST(MissSplitTest, CostFollowsAFasterHost) {
  // Host 3x faster, no fixed cost, 8 misses: n=6 gives max(2, 2) = 2 ms.
  MissSplitOptions o = Even(MissPolicy::kCost, 0);
  o.host_bytes_per_s = 3e9;
  MissSplitter s(o);
  EXPECT_EQ(s.HostShare(8, 8, kMb), 6);
}

TEST(MissSplitTest, HostCallsOfSeveralSizesGiveTheFixedCostAndTheRate) {
  // Calls of 1, 2, 3 and 4 MB taking 0.4 ms + bytes / 2 GB/s: the fitted
  // line recovers both, and the split then charges 0.4 ms per host call.
  MissSplitter s(Even(MissPolicy::kCost, 1e-3));
  for (int round = 0; round < 5; ++round) {
    for (uint64_t n = 1; n <= 4; ++n) s.ObserveHost(n * kMb, 4e-4 + n * kMb / 2e9);
  }
  EXPECT_NEAR(s.host_fixed_s(), 4e-4, 1e-9);
  EXPECT_NEAR(s.host_bytes_per_s(), 2e9, 1e-3);
  // 6 misses, device 1 ms each: n=3 gives max(3, 1.9) ms, n=4 max(2, 2.4),
  // n=5 max(1, 2.9).
  EXPECT_EQ(s.HostShare(6, 6, kMb), 4);
}

TEST(MissSplitTest, CallsOfOneSizeOnlyMoveTheRate) {
  // 2 MB calls of 3 ms with the 1 ms fixed cost given: 1 GB/s of work,
  // and the fixed cost is not touched.
  MissSplitter s(Even(MissPolicy::kCost, 1e-3));
  for (int i = 0; i < 200; ++i) s.ObserveHost(2 * kMb, 3e-3);
  EXPECT_DOUBLE_EQ(s.host_fixed_s(), 1e-3);
  EXPECT_NEAR(s.host_bytes_per_s(), 1e9, 1e-3);
}

TEST(MissSplitTest, AnIdleHostIsGivenOneMissNowAndThenToMeasureItAgain) {
  // A host estimate of 0.1 GB/s keeps every miss on the device; every
  // third split that could have used the host gives it one anyway.
  MissSplitOptions o = Even(MissPolicy::kCost, 0);
  o.host_bytes_per_s = 1e8;
  o.explore_every = 3;
  MissSplitter s(o);
  std::vector<int> got;
  for (int i = 0; i < 7; ++i) got.push_back(s.HostShare(4, 4, kMb));
  EXPECT_EQ(got, (std::vector<int>{0, 0, 1, 0, 0, 1, 0}));
  // Splits the host could not take part in do not count.
  MissSplitter t(o);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(t.HostShare(4, 0, kMb), 0);
  EXPECT_EQ(t.HostShare(4, 4, kMb), 0);
}

TEST(MissSplitTest, OneStallCountsAsFourTimesThePrediction) {
  // Predicted 1 ms (0 fixed, 1 GB/s, 1 MB); a 100 ms call counts as 4 ms:
  // 0.25 GB/s seen, half way from 1 GB/s.
  MissSplitter s(Even(MissPolicy::kCost, 0));
  s.ObserveHost(kMb, 0.1);
  EXPECT_DOUBLE_EQ(s.host_bytes_per_s(), 0.625e9);
}

TEST(MissSplitTest, ObservationsMoveTheEstimatesByTheLearningRate) {
  MissSplitter s(Even(MissPolicy::kCost, 1e-3));
  s.ObserveDevice(2 * kMb, 1e-3);  // 2 GB/s seen; half way from 1 GB/s
  EXPECT_DOUBLE_EQ(s.device_bytes_per_s(), 1.5e9);
  // 3 MB in 2 ms with 1 ms fixed: 3 GB/s of work; half way from 1.
  s.ObserveHost(3 * kMb, 2e-3);
  EXPECT_DOUBLE_EQ(s.host_bytes_per_s(), 2e9);
  EXPECT_DOUBLE_EQ(s.DeviceSeconds(3 * kMb), 2e-3);
  EXPECT_DOUBLE_EQ(s.HostSeconds(4 * kMb), 3e-3);
  EXPECT_DOUBLE_EQ(s.HostSeconds(0), 0);
  // Nonsense observations are ignored.
  s.ObserveDevice(0, 1);
  s.ObserveDevice(kMb, 0);
  s.ObserveHost(kMb, -1);
  EXPECT_DOUBLE_EQ(s.device_bytes_per_s(), 1.5e9);
  EXPECT_DOUBLE_EQ(s.host_bytes_per_s(), 2e9);
}

}  // namespace
}  // namespace sluice::memory
