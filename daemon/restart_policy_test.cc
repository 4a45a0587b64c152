#include "daemon/restart_policy.h"

#include "gtest/gtest.h"

namespace sluice::daemon {
namespace {

absl::Time T(int64_t ms) { return absl::FromUnixMillis(1000000 + ms); }

RestartPolicy::Options Small() {
  RestartPolicy::Options o;
  o.backoff_initial = absl::Milliseconds(100);
  o.backoff_max = absl::Milliseconds(350);
  o.max_consecutive_failures = 3;
  o.healthy_uptime = absl::Seconds(60);
  return o;
}

TEST(RestartPolicyTest, BacksOffThenGivesUpAfterTheLimit) {
  RestartPolicy p(Small());
  EXPECT_EQ(p.restart_at(), absl::InfiniteFuture());
  EXPECT_TRUE(p.Failed(T(0), absl::Seconds(1)));
  EXPECT_EQ(p.restart_at(), T(100));
  EXPECT_FALSE(p.Due(T(99)));
  EXPECT_TRUE(p.Due(T(100)));
  EXPECT_FALSE(p.Due(T(101))) << "due once";
  EXPECT_TRUE(p.Failed(T(200), absl::ZeroDuration()));  // the spawn failed
  EXPECT_EQ(p.restart_at(), T(400));
  EXPECT_TRUE(p.Failed(T(400), absl::Seconds(2)));
  EXPECT_EQ(p.restart_at(), T(750)) << "capped at 350 ms";
  EXPECT_EQ(p.consecutive_failures(), 3);
  EXPECT_FALSE(p.Failed(T(800), absl::Seconds(2)));
  EXPECT_EQ(p.restart_at(), absl::InfiniteFuture());
  EXPECT_EQ(p.consecutive_failures(), 4);
}

TEST(RestartPolicyTest, SuccessAndALongUptimeStartTheCountAgain) {
  RestartPolicy p(Small());
  EXPECT_TRUE(p.Failed(T(0), absl::Seconds(1)));
  EXPECT_TRUE(p.Failed(T(0), absl::Seconds(1)));
  EXPECT_EQ(p.consecutive_failures(), 2);
  p.Succeeded();
  EXPECT_TRUE(p.Failed(T(0), absl::Seconds(1)));
  EXPECT_EQ(p.restart_at(), T(100));
  EXPECT_TRUE(p.Failed(T(0), absl::Seconds(1)));
  EXPECT_EQ(p.consecutive_failures(), 2);
  // Up for more than a minute: it was working, so this is a first failure.
  EXPECT_TRUE(p.Failed(T(0), absl::Seconds(61)));
  EXPECT_EQ(p.consecutive_failures(), 1);
  EXPECT_EQ(p.restart_at(), T(100));
  p.Cancel();
  EXPECT_EQ(p.restart_at(), absl::InfiniteFuture());
  EXPECT_FALSE(p.Due(T(1000000)));
}

}  // namespace
}  // namespace sluice::daemon
