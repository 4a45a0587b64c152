#include "memory/miss_split.h"

#include <vector>

#include "gtest/gtest.h"

namespace sluice::memory {
namespace {

// 1 GB/s both ways and 1 MB experts: each expert costs 1 ms on either path.
// No exploration, and every step's saving taken as it is, unless a test
// asks for them.
MissSplitOptions Even(MissPolicy p, double fixed_s) {
  MissSplitOptions o;
  o.policy = p;
  o.device_bytes_per_s = 1e9;
  o.host_bytes_per_s = 1e9;
  o.host_fixed_s = fixed_s;
  o.explore_every = 0;
  o.explore_steps = 0;
  o.saving_weight = 1;
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
  EXPECT_FALSE(copy.host_path());
  EXPECT_EQ(copy.HostShare(6, 6, kMb), 0);
  MissSplitter host(Even(MissPolicy::kHost, 0));
  EXPECT_TRUE(host.host_path());
  EXPECT_EQ(host.HostShare(6, 6, kMb), 6);
  EXPECT_EQ(host.HostShare(6, 4, kMb), 4);  // two are not in host RAM
  EXPECT_EQ(host.HostShare(3, 9, kMb), 3);  // never more than the misses
  EXPECT_EQ(host.HostShare(0, 0, kMb), 0);
}

TEST(MissSplitTest, CostBalancesEqualPathsHalfAndHalf) {
  // 6 misses: n = 3 finishes both in 3 ms; 2 or 4 leave one path 4 ms.
  MissSplitter s(Even(MissPolicy::kCost, 0));
  EXPECT_TRUE(s.host_path());  // on until a step says otherwise
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

// ---- The estimators.

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

// 1..4 MB host calls of 0.4 ms + bytes / 2 GB/s, call i % 11 == 10 twenty
// times slower (threads asleep, page faults): 5 stalls among 50.
void FeedHostWithStalls(MissSplitter& s, int calls) {
  for (int i = 0; i < calls; ++i) {
    const uint64_t bytes = (i % 4 + 1) * kMb;
    const double seconds = 4e-4 + static_cast<double>(bytes) / 2e9;
    s.ObserveHost(bytes, i % 11 == 10 ? 20 * seconds : seconds);
  }
}

TEST(MissSplitTest, StallsAmongHostCallsLeaveTheHostRateAtTheTruth) {
  MissSplitter s(Even(MissPolicy::kCost, 1e-3));
  FeedHostWithStalls(s, 55);
  // Within 30% is the requirement; the stalls are all outside the faster
  // half of the window, so the line is exact.
  EXPECT_NEAR(s.host_bytes_per_s(), 2e9, 0.3 * 2e9);
  EXPECT_NEAR(s.host_bytes_per_s(), 2e9, 1e-3);
  EXPECT_NEAR(s.host_fixed_s(), 4e-4, 1e-9);
  EXPECT_EQ(s.HostShare(6, 6, kMb), 4);  // as without stalls
}

TEST(MissSplitTest, StallsFirstAreForgottenAfterAsManyNormalCalls) {
  // The threads were asleep: the first five calls (of 1 MB) took 20x. A
  // window that is not full trusts what it has, each call capped at 4x the
  // prediction: 4 ms, then 16 ms counted (kept 4: 0.25 GB/s), 16 (kept 4,
  // 16: 0.1), 20 (0.1), 20 (kept 4, 16, 16: 1/12 GB/s).
  MissSplitter s(Even(MissPolicy::kCost, 0));
  std::vector<double> rates;
  for (int i = 0; i < 5; ++i) {
    s.ObserveHost(kMb, 20e-3);
    rates.push_back(s.host_bytes_per_s());
  }
  const std::vector<double> want = {0.25e9, 0.25e9, 0.1e9, 0.1e9, 1e9 / 12};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(rates[i], want[i], 1) << i;
  // Five normal calls make the faster half of ten: the truth again.
  for (int i = 0; i < 5; ++i) s.ObserveHost(kMb, 1e-3);
  EXPECT_NEAR(s.host_bytes_per_s(), 1e9, 1);
  for (int i = 0; i < 45; ++i) s.ObserveHost(kMb, 1e-3);
  EXPECT_NEAR(s.host_bytes_per_s(), 1e9, 1);
  EXPECT_DOUBLE_EQ(s.host_fixed_s(), 0);
}

TEST(MissSplitTest, OneSlowCallMovesTheRateFourfoldAtMost) {
  // Predicted 1 ms (0 fixed, 1 GB/s, 1 MB); a 100 ms call counts as 4 ms.
  MissSplitter s(Even(MissPolicy::kCost, 0));
  s.ObserveHost(kMb, 0.1);
  EXPECT_DOUBLE_EQ(s.host_bytes_per_s(), 0.25e9);
  // One normal call and the faster half of the two is that one.
  s.ObserveHost(kMb, 1e-3);
  EXPECT_DOUBLE_EQ(s.host_bytes_per_s(), 1e9);
}

TEST(MissSplitTest, ALastingSlowdownIsFollowedOnceItFillsHalfTheWindow) {
  // Window 8, the faster 4 kept: 1 MB calls at 1 ms, then at 2 ms.
  MissSplitOptions o = Even(MissPolicy::kCost, 0);
  o.window = 8;
  MissSplitter s(o);
  for (int i = 0; i < 8; ++i) s.ObserveHost(kMb, 1e-3);
  std::vector<double> rates;
  for (int i = 0; i < 8; ++i) {
    s.ObserveHost(kMb, 2e-3);
    rates.push_back(s.host_bytes_per_s());
  }
  // Four slow calls change nothing; then the kept four are 3 fast + 1
  // slow (4 MB in 5 ms), 2 + 2, 1 + 3, and all slow.
  const std::vector<double> want = {1e9, 1e9, 1e9, 1e9, 0.8e9, 4e9 / 6, 4e9 / 7, 0.5e9};
  ASSERT_EQ(rates.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(rates[i], want[i]) << i;
}

TEST(MissSplitTest, StallsAmongCopiesLeaveTheDeviceRateAtTheTruth) {
  // 2 MB batches at 4 GB/s, every eleventh twenty times slower.
  MissSplitter s(Even(MissPolicy::kCost, 0));
  s.ObserveDevice(2 * kMb, 0.5e-3);
  EXPECT_DOUBLE_EQ(s.device_bytes_per_s(), 4e9);  // one call re-measures it
  for (int i = 0; i < 55; ++i) s.ObserveDevice(2 * kMb, i % 11 == 10 ? 10e-3 : 0.5e-3);
  EXPECT_NEAR(s.device_bytes_per_s(), 4e9, 0.3 * 4e9);
  EXPECT_NEAR(s.device_bytes_per_s(), 4e9, 1);
  EXPECT_NEAR(s.DeviceSeconds(4 * kMb), 1e-3, 1e-12);
}

TEST(MissSplitTest, PredictionsAndNonsenseObservations) {
  MissSplitter s(Even(MissPolicy::kCost, 1e-3));
  EXPECT_DOUBLE_EQ(s.DeviceSeconds(3 * kMb), 3e-3);
  EXPECT_DOUBLE_EQ(s.HostSeconds(4 * kMb), 5e-3);
  EXPECT_DOUBLE_EQ(s.HostSeconds(0), 0);
  s.ObserveDevice(0, 1);
  s.ObserveDevice(kMb, 0);
  s.ObserveHost(kMb, -1);
  s.ObserveHost(0, 1);
  EXPECT_DOUBLE_EQ(s.device_bytes_per_s(), 1e9);
  EXPECT_DOUBLE_EQ(s.host_bytes_per_s(), 1e9);
  EXPECT_DOUBLE_EQ(s.host_fixed_s(), 1e-3);
}

// ---- The step decision.

// One decode step: a HostShare per layer with `misses` (all reachable) of
// 1 MB, then EndStep over `n_layers`. With Even paths and no fixed cost a
// layer of m misses is predicted to save floor(m / 2) ms.
bool Step(MissSplitter& s, const std::vector<int>& misses, int n_layers = 2,
          std::vector<int>* shares = nullptr) {
  for (const int m : misses) {
    const int n = s.HostShare(m, m, kMb);
    if (shares != nullptr) shares->push_back(n);
  }
  return s.EndStep(n_layers);
}

TEST(MissSplitTest, TheHostPathTurnsOnAndOffWithHysteresis) {
  // 0.8 ms per layer, 2 layers: off below 1.6 ms a step, on above 2.4 ms.
  MissSplitOptions o = Even(MissPolicy::kCost, 0);
  o.host_path_cost_s = 0.8e-3;
  MissSplitter s(o);
  std::vector<bool> got;
  std::vector<double> smoothed;
  // Saves 2, 1, 2, 3, 2, 1 ms.
  for (const std::vector<int>& step : std::vector<std::vector<int>>{
           {2, 2}, {2}, {4}, {4, 2}, {2, 2}, {3}}) {
    got.push_back(Step(s, step));
    smoothed.push_back(s.smoothed_saving_s());
    EXPECT_EQ(s.host_path(), got.back());
    EXPECT_DOUBLE_EQ(s.step_saving_s(), 0);  // EndStep took it
  }
  // 2 ms keeps it on (not below 1.6), 1 turns it off, 2 keeps it off (not
  // above 2.4), 3 turns it on, 2 keeps it on, 1 turns it off.
  EXPECT_EQ(got, (std::vector<bool>{true, false, false, true, true, false}));
  EXPECT_EQ(smoothed, (std::vector<double>{2e-3, 1e-3, 2e-3, 3e-3, 2e-3, 1e-3}));
}

TEST(MissSplitTest, OneStepsSavingIsSmoothedBeforeItSwitchesThePath) {
  // Weight 0.1: after a 3 ms step, steps saving nothing bring the average
  // to 3 x 0.9^k ms, below the 1.6 ms cost at k = 6 (1.594 ms).
  MissSplitOptions o = Even(MissPolicy::kCost, 0);
  o.host_path_cost_s = 0.8e-3;
  o.saving_weight = 0.1;
  MissSplitter s(o);
  EXPECT_TRUE(Step(s, {6}));
  EXPECT_DOUBLE_EQ(s.smoothed_saving_s(), 3e-3);
  std::vector<bool> got;
  for (int k = 0; k < 6; ++k) got.push_back(Step(s, {}));
  EXPECT_EQ(got, (std::vector<bool>{true, true, true, true, true, false}));
  EXPECT_NEAR(s.smoothed_saving_s(), 3e-3 * 0.531441, 1e-12);
}

TEST(MissSplitTest, WhileOffTheHostPathIsExploredEveryNSteps) {
  // A host estimate of 0.1 GB/s saves nothing: off after the first step,
  // and every third step after that runs the path anyway.
  MissSplitOptions o = Even(MissPolicy::kCost, 0);
  o.host_bytes_per_s = 1e8;
  o.host_path_cost_s = 0.5e-3;
  o.explore_steps = 3;
  MissSplitter s(o);
  std::vector<bool> got, exploring;
  std::vector<int> shares;
  for (int i = 0; i < 7; ++i) {
    got.push_back(Step(s, {4, 0}, 2, &shares));
    exploring.push_back(s.exploring());
  }
  EXPECT_EQ(got, (std::vector<bool>{false, false, true, false, false, true, false}));
  EXPECT_EQ(exploring, got);
  // The host gets nothing while off or declined (step 1), and one miss in
  // each layer it can reach while exploring (steps 4 and 7); the layer
  // without misses gets none.
  EXPECT_EQ(shares, (std::vector<int>{0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0}));
}

TEST(MissSplitTest, ASpoiltHostRateIsMeasuredAgainAndThePathComesBack) {
  // The measured failure: the host estimate fell to 0.1 GB/s against 1 GB/s
  // real, the path went off and the host computed nothing again. Here the
  // exploring step measures it, and the path stays on after it.
  MissSplitOptions o = Even(MissPolicy::kCost, 0);
  o.host_bytes_per_s = 1e8;
  o.host_path_cost_s = 0.5e-3;  // 1 ms a step; on above 1.5 ms
  o.explore_steps = 3;
  MissSplitter s(o);
  std::vector<bool> got;
  std::vector<int> shares;
  for (int step = 0; step < 5; ++step) {
    for (int layer = 0; layer < 2; ++layer) {
      const int n = s.HostShare(4, 4, kMb);
      shares.push_back(n);
      if (n > 0) s.ObserveHost(n * kMb, n * 1e-3);  // the true 1 GB/s
    }
    got.push_back(s.EndStep(2));
  }
  // Step 4 explores: its first layer gives the host one miss, which
  // measures 1 GB/s, so its second layer already splits 2 + 2 (saving 2 ms
  // > 1.5 ms): the path is on from step 5.
  EXPECT_EQ(got, (std::vector<bool>{false, false, true, true, true}));
  EXPECT_EQ(shares, (std::vector<int>{0, 0, 0, 0, 0, 0, 1, 2, 2, 2}));
  EXPECT_NEAR(s.host_bytes_per_s(), 1e9, 1);
  EXPECT_FALSE(s.exploring());
}

TEST(MissSplitTest, CopyIsAlwaysOffAndHostAlwaysOn) {
  for (const MissPolicy p : {MissPolicy::kCopy, MissPolicy::kHost}) {
    MissSplitOptions o = Even(p, 0);
    o.host_bytes_per_s = 1e8;  // saves nothing
    o.explore_steps = 1;       // would explore every step
    MissSplitter s(o);
    const bool want = p == MissPolicy::kHost;
    std::vector<int> shares;
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(Step(s, {4}, 2, &shares), want) << MissPolicyName(p);
      EXPECT_FALSE(s.exploring());
    }
    EXPECT_EQ(shares, std::vector<int>(4, want ? 4 : 0)) << MissPolicyName(p);
  }
  // With host 3x faster than the device copy still never splits.
  MissSplitOptions o = Even(MissPolicy::kCopy, 0);
  o.host_bytes_per_s = 3e9;
  MissSplitter copy(o);
  EXPECT_FALSE(Step(copy, {8}));
  EXPECT_DOUBLE_EQ(copy.smoothed_saving_s(), 0);
}

}  // namespace
}  // namespace sluice::memory
